package gen

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mcpulse/mcpulse/demo/outcome"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/suppression"
)

// --contact-violations adds N cases of each further kind, deterministic, whose invitations
// are in the corpus with the properties the audit reads; the members file and the expected
// contact_policy come with them, and the demo shape is required.
func TestContactViolationCases(t *testing.T) {
	cfg := Config{Events: 1500, Seed: 3, End: testEnd, ContactViolations: 2}
	data, o := generate(t, cfg)
	again, o2 := generate(t, cfg)
	if !bytes.Equal(data, again) || !reflect.DeepEqual(o, o2) {
		t.Fatal("two runs with contact violations differ")
	}
	cp := o.ContactPolicy
	if cp == nil {
		t.Fatal("no contact_policy in the outcome")
	}
	invitations := map[string]map[string]any{}
	for _, line := range lines(data) {
		var e struct {
			Event      string         `json:"event"`
			Properties map[string]any `json:"properties"`
		}
		if json.Unmarshal(line, &e) != nil || e.Event != ingest.EventInvitationSent {
			continue
		}
		if id, ok := e.Properties["invitation_id"].(string); ok {
			invitations[id] = e.Properties
		}
	}
	for _, k := range suppression.ViolationKinds[2:] {
		ids := cp.InvitationIDs[k.Kind]
		if cp.Counts[k.Kind] != 2 || len(ids) != 2 {
			t.Errorf("%s: %d %v, want 2", k.Kind, cp.Counts[k.Kind], ids)
		}
		for _, id := range ids {
			p := invitations[id]
			if p == nil || p[suppression.PropConversation] == nil || p[suppression.PropRequestID] == nil || p[suppression.PropSurface] == nil {
				t.Errorf("%s: invitation %s missing or without its context: %v", k.Kind, id, p)
			}
		}
	}
	if len(cp.Members) != 2 {
		t.Errorf("members %v", cp.Members)
	}
	if _, clean := generate(t, Config{Events: 1500, Seed: 3, End: testEnd}); clean.ContactPolicy != nil {
		t.Error("a corpus without contact violations has a contact_policy")
	}
	if _, err := Generate(Config{Events: 10, Seed: 1, End: testEnd, Shape: ShapeSDK, ContactViolations: 1}, &bytes.Buffer{}); err == nil {
		t.Error("contact violations accepted with the SDK shape")
	}

	path := filepath.Join(t.TempDir(), "events.jsonl")
	if _, err := WriteFiles(cfg, path); err != nil {
		t.Fatal(err)
	}
	members, err := os.ReadFile(path + ContactExclusionSuffix)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(members), "@cases.example\n"); got != 2 {
		t.Errorf("members file holds %d ids:\n%s", got, members)
	}
	read, err := outcome.Read(path + ".expected.json")
	if err != nil {
		t.Fatal(err)
	}
	if read.ContactPolicy == nil || read.ContactPolicy.ExclusionMembers != "events.jsonl"+ContactExclusionSuffix ||
		!reflect.DeepEqual(read.ContactPolicy.InvitationIDs, cp.InvitationIDs) {
		t.Errorf("expected file's contact_policy %+v", read.ContactPolicy)
	}
}
