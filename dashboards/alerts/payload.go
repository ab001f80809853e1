package alerts

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/mcpulse/mcpulse/internal/safetext"
)

// Transition is one change of an alert instance, as recorded and notified.
type Transition struct {
	// ID is deterministic (transitionID): the same change has the same id on every replica.
	ID       string
	Rule     string
	Instance string
	Seq      uint32
	// State is StateFiring or StateResolved.
	State      string
	PreviousID string
	// Labels are the instance's label columns and values (as shown: formatted, masked).
	Labels map[string]string
	// Value and Volume are the figures at the transition (nil when the instance had no row,
	// e.g. it resolved because its rows stopped).
	Value, Volume *float64
	// Summary is one line for people: "Dead-letter rate 3.2% (32 of 1,000 events), above 1%".
	Summary string
	// At is when it was seen; StartsAt is when the episode started firing (At of its firing
	// transition).
	At, StartsAt time.Time
}

// Alert states.
const (
	StateFiring   = "firing"
	StateResolved = "resolved"
)

// transitionID is the hex SHA-256 of the rule, the instance, the chain position, the state
// and the previous transition's id: a chain node has exactly one possible successor id, so
// replicas that extend the same chain compute the same id.
func transitionID(rule, instance string, seq uint32, state, previousID string) string {
	h := sha256.New()
	for _, part := range []string{rule, instance, fmt.Sprint(seq), state, previousID} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// AlertmanagerMessage is the JSON body Alertmanager's webhook receiver POSTs (version 4), as
// documented at https://prometheus.io/docs/alerting/latest/configuration/#webhook_config:
// mcpulse sends one alert per message.
type AlertmanagerMessage struct {
	Version           string              `json:"version"`
	GroupKey          string              `json:"groupKey"`
	TruncatedAlerts   int                 `json:"truncatedAlerts"`
	Status            string              `json:"status"`
	Receiver          string              `json:"receiver"`
	GroupLabels       map[string]string   `json:"groupLabels"`
	CommonLabels      map[string]string   `json:"commonLabels"`
	CommonAnnotations map[string]string   `json:"commonAnnotations"`
	ExternalURL       string              `json:"externalURL"`
	Alerts            []AlertmanagerAlert `json:"alerts"`
}

// AlertmanagerAlert is one alert of an AlertmanagerMessage. EndsAt is the zero time
// ("0001-01-01T00:00:00Z") while firing, the resolve time once resolved.
type AlertmanagerAlert struct {
	Status       string            `json:"status"`
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Fingerprint  string            `json:"fingerprint"`
}

// alertLabels are a transition's Alertmanager labels: alertname, severity and the instance's
// label columns (a label column named alertname or severity is kept under a "label_" name).
func alertLabels(r Rule, t Transition) map[string]string {
	out := map[string]string{"alertname": r.Name, "severity": r.Severity}
	for k, v := range t.Labels {
		if _, taken := out[k]; taken {
			k = "label_" + k
		}
		out[k] = v
	}
	return out
}

// dashboardURL links to the alerts dashboard (or the rule's panel) under externalURL; "" when
// there is no external URL.
func dashboardURL(r Rule, externalURL string) string {
	if externalURL == "" {
		return ""
	}
	if r.Panel != "" {
		dash, id, _ := strings.Cut(r.Panel, "/")
		return externalURL + "/dashboards/" + url.PathEscape(dash) + "#panel-" + url.PathEscape(id)
	}
	return externalURL + "/dashboards/" + AlertsDashboard
}

// AlertsDashboard is the dashboard that shows the alert history (dashboards/alerts.yaml).
const AlertsDashboard = "alerts"

// alertmanagerMessage builds the webhook body of one transition for receiver.
func alertmanagerMessage(r Rule, t Transition, receiver, externalURL string) AlertmanagerMessage {
	labels := alertLabels(r, t)
	annotations := map[string]string{"summary": t.Summary, "title": r.Title}
	if r.Description != "" {
		annotations["description"] = strings.Join(strings.Fields(r.Description), " ")
	}
	if t.Value != nil {
		annotations["value"] = fmt.Sprint(*t.Value)
	}
	alert := AlertmanagerAlert{
		Status: t.State, Labels: labels, Annotations: annotations, StartsAt: t.StartsAt.UTC(),
		GeneratorURL: dashboardURL(r, externalURL), Fingerprint: fingerprint(labels),
	}
	if t.State == StateResolved {
		alert.EndsAt = t.At.UTC()
	}
	return AlertmanagerMessage{
		Version: "4", GroupKey: fmt.Sprintf("{}:{alertname=%q}", r.Name), Status: t.State, Receiver: receiver,
		GroupLabels: map[string]string{"alertname": r.Name}, CommonLabels: maps.Clone(labels),
		CommonAnnotations: maps.Clone(annotations), ExternalURL: externalURL, Alerts: []AlertmanagerAlert{alert},
	}
}

// fingerprint identifies an alert's label set (16 hex digits, as Alertmanager shows them).
func fingerprint(labels map[string]string) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		h.Write([]byte(k + "\x00" + labels[k] + "\x00"))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// slackMessage builds the Slack incoming-webhook body of one transition: a plain-text
// fallback and blocks (a header line, the summary, the labels, a link). Caller-chosen text
// (labels, summaries) is escaped for Slack's mrkdwn (&, <, >) and its control and bidi
// characters shown as escapes (safetext.Escape), so a tool name cannot inject a link, a mention or a reordered line.
func slackMessage(r Rule, t Transition, externalURL string) *slack.WebhookMessage {
	mark, word := ":red_circle:", "FIRING"
	if t.State == StateResolved {
		mark, word = ":large_green_circle:", "RESOLVED"
	}
	title := slackEscape(r.Title)
	text := fmt.Sprintf("[%s] %s: %s", word, title, slackEscape(t.Summary))
	lines := []string{fmt.Sprintf("%s *%s* · *%s* (%s, %s)", mark, word, title, slackEscape(r.Name), r.Severity), slackEscape(t.Summary)}
	if len(t.Labels) > 0 {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(t.Labels)) {
			parts = append(parts, slackEscape(k)+": `"+strings.ReplaceAll(slackEscape(t.Labels[k]), "`", "'")+"`")
		}
		lines = append(lines, strings.Join(parts, " · "))
	}
	if t.State == StateResolved {
		lines = append(lines, "Firing since "+t.StartsAt.UTC().Format("2006-01-02 15:04 UTC")+", resolved "+t.At.UTC().Format("2006-01-02 15:04 UTC"))
	}
	if link := dashboardURL(r, externalURL); link != "" {
		lines = append(lines, "<"+link+"|Open the dashboard>")
	}
	section := slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, strings.Join(lines, "\n"), false, false), nil, nil)
	return &slack.WebhookMessage{Text: text, Blocks: &slack.Blocks{BlockSet: []slack.Block{section}}}
}

// slackEscape masks text and escapes the three characters Slack's mrkdwn gives meaning to
// (https://api.slack.com/reference/surfaces/formatting#escaping).
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(safetext.Escape(s))
}
