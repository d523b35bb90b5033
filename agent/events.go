package agent

import (
	"time"

	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/store"
)

// StopReason says why a turn ended. Every turn ends with exactly one.
type StopReason string

const (
	StopEndTurn           StopReason = "end_turn"
	StopMaxSteps          StopReason = "max_steps"
	StopToolRule          StopReason = "tool_rule"
	StopRequiresApproval  StopReason = "requires_approval"
	StopCancelled         StopReason = "cancelled"
	StopMaxTokensExceeded StopReason = "max_tokens_exceeded"
	StopLLMError          StopReason = "llm_error"
	StopInvalidResponse   StopReason = "invalid_llm_response"
	StopContextOverflow   StopReason = "context_overflow"
	StopBudgetExceeded    StopReason = "budget_exceeded"
	// StopTurnTimeout: the turn ran past its deadline (agent.turn_timeout).
	// The user is told so in one sentence and the turn fails; the message
	// is not tried again (it may have had effects already).
	StopTurnTimeout StopReason = "turn_timeout"
)

// StopClass groups stop reasons. The classes are the statuses the store
// records for a finished turn.
type StopClass string

const (
	ClassCompleted StopClass = store.TurnCompleted
	ClassCancelled StopClass = store.TurnCancelled
	ClassFailed    StopClass = store.TurnFailed
)

// Class groups stop reasons: ClassCompleted, ClassFailed or ClassCancelled.
func (r StopReason) Class() StopClass {
	switch r {
	case StopEndTurn, StopMaxSteps, StopToolRule, StopRequiresApproval, StopMaxTokensExceeded, StopBudgetExceeded:
		return ClassCompleted
	case StopCancelled:
		return ClassCancelled
	default:
		return ClassFailed
	}
}

// EventKind names an event in a turn's stream.
type EventKind string

const (
	EventTurnStart   EventKind = "turn_start"
	EventTextDelta   EventKind = "text_delta"   // a fragment of streamed model text
	EventInterimText EventKind = "interim_text" // text that came with tool calls; never sent to the chat
	// EventThinking: the model began reasoning in this call (once per
	// call). Its reasoning is never an event, a reply or a preview.
	EventThinking EventKind = "thinking"
	// EventReplyDelta is a fragment of the text argument of a send_message
	// call while the model streams it (CallID names the call; Text is the
	// fragment, decoded from JSON). The call may still fail or be refused:
	// what was sent is only known at EventToolEnd.
	EventReplyDelta      EventKind = "reply_delta"
	EventToolStart       EventKind = "tool_start"
	EventToolEnd         EventKind = "tool_end"
	EventCompactionStart EventKind = "compaction_start"
	EventCompactionEnd   EventKind = "compaction_end"
	EventUsage           EventKind = "usage" // after each model call
	EventRetry           EventKind = "retry" // an empty reply retried, a compaction retry
	EventDone            EventKind = "done"  // terminal: exactly one per turn
)

// Event is one thing that happened in a turn, for channels, logs and the
// dashboard. Fields not relevant to a kind are zero.
type Event struct {
	Kind   EventKind
	TurnID int64
	ChatID int64
	Step   int
	Time   time.Time

	Text string // delta, interim text, retry reason, final reply; tool_start: the tool's description

	Tool     string
	CallID   string
	Args     string
	Result   string // tool_end: the (execution-truncated) result
	IsError  bool
	Duration time.Duration

	Usage        llm.Usage // usage: this call; done: the turn's total
	Model        string
	TokensBefore int // compaction
	TokensAfter  int
	Layer        int

	StopReason StopReason // done
	Err        string     // done: what failed, if anything
	Skills     []string   // done: the skills the turn engaged (Turn.Skills)
}
