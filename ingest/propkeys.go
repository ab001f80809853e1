package ingest

// Property keys known to the kinds are numbered once, at start-up: Parse finds each property's
// number with one probe of a small hash table, and a kind reads a property by its number (an
// index into the event's slots), not by a map lookup per read.

// propKey numbers a known property key.
type propKey uint8

// maxPropKeys bounds the known keys: a kind's reads are a bit set of them.
const maxPropKeys = 64

var (
	propKeyNames []string
	// propKeyTable is an open-addressing hash table of the known keys: each entry is a key's
	// number plus one, 0 when empty.
	propKeyTable [256]uint8
)

// newPropKey registers a property key and returns its number.
func newPropKey(name string) propKey {
	if _, dup := lookupPropKey([]byte(name)); dup || name == "" {
		panic("ingest: property key registered twice or empty: " + name)
	}
	if len(propKeyNames) == maxPropKeys {
		panic("ingest: more than 64 known property keys")
	}
	propKeyNames = append(propKeyNames, name)
	for h := propKeyHash([]byte(name)); ; h = (h + 1) % uint(len(propKeyTable)) {
		if propKeyTable[h] == 0 {
			propKeyTable[h] = uint8(len(propKeyNames))
			return propKey(len(propKeyNames) - 1)
		}
	}
}

// String returns the property's key.
func (k propKey) String() string { return propKeyNames[k] }

// propKeyHash mixes a key's length and three of its bytes (keys share long prefixes, such as
// "$mcp_" and "interview_recruitment_", so the last ones differ most).
func propKeyHash(key []byte) uint {
	n := len(key)
	if n == 0 {
		return 0
	}
	h := uint(n)*6152 ^ uint(key[n-1])*31973 ^ uint(key[n/2])*1858 // multipliers: searched for short probes
	if n >= 2 {
		h ^= uint(key[n-2]) * 58545
	}
	return (h ^ h>>8) % uint(len(propKeyTable))
}

// lookupPropKey returns the number of a known key.
func lookupPropKey(key []byte) (propKey, bool) {
	for h := propKeyHash(key); ; h = (h + 1) % uint(len(propKeyTable)) {
		e := propKeyTable[h]
		if e == 0 {
			return 0, false
		}
		if propKeyNames[e-1] == string(key) {
			return propKey(e - 1), true
		}
	}
}

// propKeySet is a set of known keys.
type propKeySet uint64

func (s propKeySet) has(k propKey) bool { return s&(1<<k) != 0 }

// keySet returns the set of keys; it panics on a key listed twice.
func keySet(keys ...propKey) propKeySet {
	var s propKeySet
	for _, k := range keys {
		if s.has(k) {
			panic("ingest: property key listed twice: " + k.String())
		}
		s |= 1 << k
	}
	return s
}

// The known property keys: those the kinds read (DESIGN.md §2, and the MCP analytics SDK's,
// @posthog/mcp src/extensions/posthog-events.ts), and a few others every SDK event carries,
// known only so that a repeated one is found without comparing keys.
var (
	keyToolName         = newPropKey("$mcp_tool_name")
	keyDurationMs       = newPropKey("$mcp_duration_ms")
	keyClientName       = newPropKey(propClientName)
	keyClientVersion    = newPropKey(propClientVersion)
	keyExecVerb         = newPropKey("$mcp_exec_verb")
	keyExecTargetTool   = newPropKey("$mcp_exec_target_tool")
	keyMode             = newPropKey("$mcp_mode")
	keyConversationID   = newPropKey("$mcp_conversation_id")
	keySessionID        = newPropKey(propSessionID)
	keySource           = newPropKey("source")
	keyMCPSource        = newPropKey("$mcp_source")
	keyErrorType        = newPropKey("$mcp_error_type")
	keyIsError          = newPropKey("$mcp_is_error")
	keyIgnoredKeys      = newPropKey("$mcp_ignored_keys")
	keyIgnoredKeysTotal = newPropKey("$mcp_ignored_keys_total")
	keyServerName       = newPropKey(propServerName)
	keyServerVersion    = newPropKey(propServerVersion)
	keyProtocolVersion  = newPropKey(propProtocolVersion)
	keyIntent           = newPropKey("$mcp_intent")
	keyIntentSource     = newPropKey("$mcp_intent_source")
	keyErrorMessage     = newPropKey("$mcp_error_message")
	keyParameters       = newPropKey(propParameters)
	keyResponse         = newPropKey(propResponse)

	keyRecruitmentReason = newPropKey("interview_recruitment_reason")
	keyURLSupported      = newPropKey("interview_recruitment_url_supported")
	keyFormSupported     = newPropKey("interview_recruitment_form_supported")
	keyDiagCampaignID    = newPropKey("interview_recruitment_campaign_id")
	keyCompletedCalls    = newPropKey("interview_recruitment_completed_calls")
	keySessionAge        = newPropKey("interview_recruitment_session_age_seconds")

	keyCampaignID   = newPropKey("campaign_id")
	keyInvitationID = newPropKey("invitation_id")
	keyFeatureFlag  = newPropKey("feature_flag")
	keyInstanceURL  = newPropKey("instance_url")
	keyResponseText = newPropKey("response")
	keyRespondedAt  = newPropKey("responded_at")

	keyListedToolNames = newPropKey("$mcp_listed_tool_names")
	keyExceptionList   = newPropKey("$exception_list")
	keyExceptionLevel  = newPropKey("$exception_level")

	keyResourceName                 = newPropKey("$mcp_resource_name")
	keyLLMModel                     = newPropKey("$mcp_llm_model")
	keyFeedbackType                 = newPropKey("$mcp_feedback_type")
	keyFeedbackSummary              = newPropKey("$mcp_feedback_summary")
	keyFeedbackDetails              = newPropKey("$mcp_feedback_details")
	keyFeedbackFrictionPoints       = newPropKey("$mcp_feedback_friction_points")
	keyFeedbackSuggestedImprovement = newPropKey("$mcp_feedback_suggested_improvement")
	keyFeedbackSentiment            = newPropKey("$mcp_feedback_sentiment")
	keyFeedbackTool                 = newPropKey("$mcp_feedback_tool")
	keyFeedbackTaskCompleted        = newPropKey("$mcp_feedback_task_completed")
	keyPersonSet                    = newPropKey("$set")
	keyPersonSetOnce                = newPropKey("$set_once")

	_ = newPropKey("$lib")
	_ = newPropKey("$lib_version")
	_ = newPropKey("$process_person_profile")
	_ = newPropKey("$mcp_tool_description")
	_ = newPropKey("$is_server")
	_ = newPropKey("$geoip_disable")
)
