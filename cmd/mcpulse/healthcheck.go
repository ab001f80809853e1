package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpulse/mcpulse/internal/safetext"
)

// newHealthcheckCmd is `mcpulse healthcheck URL`: the container health check of the
// docker-compose services, whose image has no curl.
func newHealthcheckCmd() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "healthcheck URL",
		Short: "GET a URL and exit 0 on a 2xx answer, 1 otherwise (container health checks)",
		Long: `healthcheck sends GET URL and exits 0 when the answer is 2xx, 1 otherwise (another status,
no answer within --timeout, connection refused), printing the reason on stderr. It lets a
container without curl check a service's /healthz or /readyz (see docker-compose.yml).`,
		Example: "  mcpulse healthcheck http://127.0.0.1:9100/readyz\n  mcpulse healthcheck --timeout 2s http://127.0.0.1:8080/healthz",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("healthcheck takes one URL, got %d arguments (e.g. mcpulse healthcheck http://127.0.0.1:8080/healthz)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout <= 0 {
				return fmt.Errorf("--timeout must be positive, got %s", timeout)
			}
			u, err := url.Parse(args[0])
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("healthcheck: %s is not an http(s) URL", safetext.Quote(args[0]))
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
			if err != nil {
				return err
			}
			unhealthy := func(why string) error {
				fmt.Fprintf(cmd.ErrOrStderr(), "mcpulse healthcheck: %s: %s\n", u.Redacted(), why)
				return exitCodeError{code: 1, msg: "unhealthy"}
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				return unhealthy(err.Error())
			}
			defer res.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
			if res.StatusCode/100 != 2 {
				// The body is a service's own /readyz text; %q keeps it on one line.
				return unhealthy(fmt.Sprintf("%s %q", res.Status, strings.TrimSpace(string(body))))
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "how long to wait for the answer")
	return cmd
}
