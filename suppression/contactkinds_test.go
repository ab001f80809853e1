package suppression_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/suppression"
)

func (p *pipeline) toolCall(distinctID, client, conversation, tool string, isError bool, at time.Time, extra map[string]any) {
	props := map[string]any{"$mcp_tool_name": tool, "$mcp_is_error": isError, "$mcp_client_name": client, "$mcp_conversation_id": conversation}
	for k, v := range extra {
		props[k] = v
	}
	p.send(ingest.TopicToolCalls, map[string]any{"uuid": p.uuid(), "event": ingest.EventToolCall, "distinct_id": distinctID,
		"timestamp": at.Format(time.RFC3339Nano), "properties": props})
}

// Each further kind is found from what the events carry, and only there: an invitation
// without the properties a rule needs is not judged by it.
func TestContactPolicyAuditFindsEachFurtherKind(t *testing.T) {
	p := newPipeline(t)
	now := time.Now().UTC().Truncate(time.Second)
	ctx := context.Background()
	conv := func(did, id string) map[string]any {
		return map[string]any{"$mcp_client_name": "cursor", "$mcp_conversation_id": id, "interview_recruitment_surface": "mcp",
			"interview_recruitment_task_bound": false, "interview_recruitment_request_id": "req-" + id,
			"interview_recruitment_url_supported": true, "interview_recruitment_completed_calls": 3, "interview_recruitment_session_age_seconds": 130}
	}
	warm := func(did, id string, t0 time.Time, ok int) {
		for i := range ok {
			p.toolCall(did, "cursor", id, "query-run", false, t0.Add(time.Duration(i)*50*time.Second), nil)
		}
		p.toolCall(did, "cursor", id, "search_docs", false, t0.Add(10*time.Second), nil)                                 // docs: not a product call
		p.toolCall(did, "cursor", id, "query-run", true, t0.Add(20*time.Second), nil)                                    // failed: not counted
		p.toolCall(did, "cursor", id, "exec", false, t0.Add(30*time.Second), map[string]any{"$mcp_exec_verb": "search"}) // discovery
	}
	t0 := now.Add(-2 * time.Hour)
	// ok: 3 successful product calls over 100 s before the invitation 150 s after the first.
	warm("ok", "c-ok", t0, 3)
	p.recruitment(ingest.EventInvitationSent, "ok", "i-ok", t0.Add(150*time.Second), conv("ok", "c-ok"))
	// early: 2 successful product calls; the server said 3 (it disagrees).
	warm("early", "c-early", t0, 2)
	p.recruitment(ingest.EventInvitationSent, "early", "i-early", t0.Add(150*time.Second), conv("early", "c-early"))
	// young: 3 calls but only 110 s since the first.
	warm("young", "c-young", t0, 3)
	p.recruitment(ingest.EventInvitationSent, "young", "i-young", t0.Add(110*time.Second), conv("young", "c-young"))
	// form-only client.
	warm("form", "c-form", t0, 3)
	props := conv("form", "c-form")
	props["interview_recruitment_url_supported"] = false
	p.recruitment(ingest.EventInvitationSent, "form", "i-form", t0.Add(150*time.Second), props)
	// another surface, and a task-bound request.
	warm("ai", "c-ai", t0, 3)
	props = conv("ai", "c-ai")
	props["interview_recruitment_surface"] = "posthog_ai\u202e"
	p.recruitment(ingest.EventInvitationSent, "ai", "i-ai", t0.Add(150*time.Second), props)
	warm("task", "c-task", t0, 3)
	props = conv("task", "c-task")
	props["interview_recruitment_task_bound"] = true
	p.recruitment(ingest.EventInvitationSent, "task", "i-task", t0.Add(150*time.Second), props)
	// two invitations from one request.
	warm("twice", "c-twice", t0, 3)
	p.recruitment(ingest.EventInvitationSent, "twice", "i-twice-1", t0.Add(150*time.Second), conv("twice", "c-twice"))
	p.recruitment(ingest.EventInvitationSent, "twice", "i-twice-2", t0.Add(151*time.Second), conv("twice", "c-twice"))
	// an excluded person, and an invitation with no context at all (judged by nothing new).
	warm("excluded", "c-excluded", t0, 3)
	p.recruitment(ingest.EventInvitationSent, "excluded", "i-excluded", t0.Add(150*time.Second), conv("excluded", "c-excluded"))
	p.invite("bare", "i-bare", t0)
	p.drain()

	a, err := suppression.AuditContactPolicyWith(ctx, p.ch, now.Add(-24*time.Hour), now, false,
		suppression.ContactPolicyOptions{Excluded: map[string]bool{"excluded": true}, ExclusionSource: "test"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		suppression.ViolationBeforeThresholds:    {"i-early", "i-young"},
		suppression.ViolationURLUnsupported:      {"i-form"},
		suppression.ViolationExcludedSurface:     {"i-ai", "i-task"},
		suppression.ViolationDuplicateEvaluation: {"i-twice-2"},
		suppression.ViolationExcludedPerson:      {"i-excluded"},
		suppression.ViolationRepeatWithin7Days:   {"i-twice-2"},
	}
	for _, k := range suppression.ViolationKinds {
		got := a.InvitationIDs(k.Kind)
		slices.Sort(got)
		if fmt.Sprint(got) != fmt.Sprint(want[k.Kind]) || a.ByKind[k.Kind] != len(want[k.Kind]) {
			t.Errorf("%s: %v (count %d), want %v", k.Kind, got, a.ByKind[k.Kind], want[k.Kind])
		}
	}
	for _, v := range a.Violations {
		switch v.InvitationID {
		case "i-early":
			if *v.RecountedCalls != 2 || v.ReportedCalls == nil || *v.ReportedCalls != 3 || *v.MinCompletedCalls != 3 || v.ReportedAgeSeconds == nil || *v.RecountedAgeSeconds != 150 {
				t.Errorf("early: %+v; want 2 recounted over 150 s, the server's 3 calls and 130 s beside them", v)
			}
		case "i-young":
			if *v.RecountedCalls != 3 || *v.RecountedAgeSeconds != 110 || v.ReportedCalls != nil || v.ReportedAgeSeconds == nil {
				t.Errorf("young: %+v; want 3 calls over 110 s, the server's age beside it", v)
			}
		case "i-ai":
			if strings.ContainsRune(v.Detail, '\u202e') {
				t.Errorf("detail %q shows a bidi control", v.Detail)
			}
		}
	}
	if c := a.ByCampaign["onboarding"]; c.BeforeThresholds != 2 || c.ExcludedSurface != 2 || c.DuplicateEvaluation != 1 || c.ExcludedPerson != 1 || c.URLUnsupported != 1 {
		t.Errorf("per campaign %+v", c)
	}
	var stored uint64
	if err := p.ch.QueryRow(ctx, "SELECT count() FROM mcpulse.contact_policy_violations FINAL WHERE kind = 'invited_before_thresholds' AND recounted_calls IS NOT NULL").Scan(&stored); err != nil || stored != 2 {
		t.Errorf("stored before-threshold violations %d, %v; want 2", stored, err)
	}

	// A payload version in force raises the thresholds: 0 calls and 0 s make nothing early.
	if err := p.ch.Exec(ctx, `INSERT INTO mcpulse.flag_payload_versions (flag_key, variant, first_seen, last_seen, payload_sha256, payload, removed)
SELECT 'mcp-interviews', 'onboarding', toDateTime(?, 'UTC'), toDateTime(?, 'UTC'), 'x', '{"message":"m","booking_url":"https://x","min_completed_tool_calls":0,"min_session_age_seconds":0}', 0`,
		t0.Add(-time.Hour).Unix(), t0.Unix()); err != nil {
		t.Fatal(err)
	}
	a, err = suppression.AuditContactPolicyWith(ctx, p.ch, now.Add(-24*time.Hour), now, true, suppression.ContactPolicyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := a.InvitationIDs(suppression.ViolationBeforeThresholds); len(got) != 0 {
		t.Errorf("under a payload of zero thresholds, early invitations %v", got)
	}
}

// The cohort source reads PostHog's paginated persons answer, following "next" on the same host.
func TestFetchCohortMembersFollowsPages(t *testing.T) {
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer phx_test" || r.URL.Path != "/api/projects/2/cohorts/641799/persons/" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"type":"authentication_error","code":"not_authenticated","detail":"bad key \u202e","attr":null}`))
			return
		}
		var next any
		ids := []string{"a@example.com", "0192f2a0-0000-7000-8000-000000000001"}
		if r.URL.Query().Get("offset") == "" {
			next = srv.URL + "/api/projects/2/cohorts/641799/persons/?offset=2"
		} else {
			ids = []string{"李雷"}
		}
		var results []map[string]any
		for i, id := range ids {
			results = append(results, map[string]any{"id": i + 1, "uuid": "0192f2a0-0000-7000-8000-00000000000" + fmt.Sprint(i), "name": id,
				"distinct_ids": []string{id}, "properties": map[string]any{"email": id}, "is_identified": true, "created_at": "2026-11-01T00:00:00Z"})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"results": results, "next": next, "previous": nil})
	}))
	defer srv.Close()
	got, err := suppression.FetchCohortMembers(context.Background(), suppression.CohortSource{Host: srv.URL, ProjectID: "2", CohortID: 641799, APIKey: "phx_test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || !got["李雷"] || !got["a@example.com"] {
		t.Errorf("members %v", got)
	}
	_, err = suppression.FetchCohortMembers(context.Background(), suppression.CohortSource{Host: srv.URL, ProjectID: "2", CohortID: 641799, APIKey: "wrong"})
	if err == nil || strings.Contains(err.Error(), "wrong") || strings.ContainsRune(err.Error(), '\u202e') || !strings.Contains(err.Error(), "bad key") {
		t.Errorf("a refused key: %v", err)
	}
}

// A cohort API that never finishes a page fails the read within the page timeout, naming the
// host, rather than holding the audit for ever.
func TestFetchCohortMembersBoundsEachPage(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"results": [`)) // then the body stalls
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	_, err := suppression.FetchCohortMembers(context.Background(), suppression.CohortSource{Host: srv.URL, ProjectID: "2", CohortID: 641799,
		APIKey: "phx_test", Timeout: 200 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "did not answer within 200ms") || !strings.Contains(err.Error(), strings.TrimPrefix(srv.URL, "http://")) {
		t.Errorf("a stalled page: %v, want an error naming the host and the timeout", err)
	}
}
