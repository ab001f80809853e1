package ingest

import "testing"

func TestPropKeysFound(t *testing.T) {
	worst := 0
	for i, name := range propKeyNames {
		k, ok := lookupPropKey([]byte(name))
		if !ok || int(k) != i || k.String() != name {
			t.Fatalf("%q: got %d %v", name, k, ok)
		}
		probes := 1
		for h := propKeyHash([]byte(name)); int(propKeyTable[h])-1 != i; h = (h + 1) % uint(len(propKeyTable)) {
			probes++
		}
		worst = max(worst, probes)
	}
	for _, name := range []string{"", "$", "$mcp_tool_nam", "$mcp_tool_namE", "uuid", "$mcp_tool_name\x00", "interview_recruitment_", "Source"} {
		if _, ok := lookupPropKey([]byte(name)); ok {
			t.Errorf("%q found", name)
		}
	}
	t.Logf("%d keys, at most %d probes", len(propKeyNames), worst)
}
