package slackfake

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Block Kit limits the fake checks (Slack's reference, "Blocks" and
// "Block elements"): a section's text 3000 characters, a header's 150,
// the markdown blocks of a message 12,000 together, an actions block 25
// elements, a button's text 75, action_id and block_id 255, a button's
// value 2000; block_ids unique in a message, action_ids unique in a block.
const (
	maxSectionText  = 3000
	maxMarkdownText = 12000
	maxHeaderText   = 150
	maxActions      = 25
	maxButtonText   = 75
	maxID           = 255
	maxValue        = 2000
)

type blockJSON struct {
	Type     string          `json:"type"`
	BlockID  string          `json:"block_id"`
	Text     json.RawMessage `json:"text"` // a text object; a string in a markdown block
	Elements []elementJSON   `json:"elements"`
}

// text is a block's text, from a text object or a string.
func (b blockJSON) text() (string, bool) {
	var s string
	if json.Unmarshal(b.Text, &s) == nil {
		return s, true
	}
	var t textJSON
	if json.Unmarshal(b.Text, &t) == nil && b.Text != nil {
		return t.Text, true
	}
	return "", false
}

type textJSON struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type elementJSON struct {
	Type     string    `json:"type"`
	ActionID string    `json:"action_id"`
	Value    string    `json:"value"`
	Text     *textJSON `json:"text"`
}

// checkBlocks returns what is wrong with a message's blocks, or "".
func checkBlocks(arr []json.RawMessage) string {
	blockIDs := map[string]bool{}
	markdown := 0
	for i, raw := range arr {
		var b blockJSON
		if json.Unmarshal(raw, &b) != nil || b.Type == "" {
			return fmt.Sprintf("block %d: not a block", i)
		}
		if b.BlockID != "" {
			if utf8.RuneCountInString(b.BlockID) > maxID || blockIDs[b.BlockID] {
				return fmt.Sprintf("block %d: bad or duplicate block_id", i)
			}
			blockIDs[b.BlockID] = true
		}
		text, hasText := b.text()
		n := utf8.RuneCountInString(text)
		switch b.Type {
		case "section":
			if n > maxSectionText {
				return fmt.Sprintf("block %d: section text over %d", i, maxSectionText)
			}
		case "header":
			if !hasText || n > maxHeaderText {
				return fmt.Sprintf("block %d: header text missing or over %d", i, maxHeaderText)
			}
		case "markdown":
			if markdown += n; !hasText || markdown > maxMarkdownText {
				return fmt.Sprintf("block %d: markdown text missing or over %d in all", i, maxMarkdownText)
			}
		case "actions":
			if len(b.Elements) == 0 || len(b.Elements) > maxActions {
				return fmt.Sprintf("block %d: 1 to %d elements", i, maxActions)
			}
			ids := map[string]bool{}
			for _, e := range b.Elements {
				if e.ActionID != "" {
					if utf8.RuneCountInString(e.ActionID) > maxID || ids[e.ActionID] {
						return fmt.Sprintf("block %d: bad or duplicate action_id", i)
					}
					ids[e.ActionID] = true
				}
				if e.Type == "button" {
					if e.Text == nil || e.Text.Text == "" || utf8.RuneCountInString(e.Text.Text) > maxButtonText {
						return fmt.Sprintf("block %d: button text missing or over %d", i, maxButtonText)
					}
					if utf8.RuneCountInString(e.Value) > maxValue {
						return fmt.Sprintf("block %d: button value over %d", i, maxValue)
					}
				}
			}
		}
	}
	return ""
}

// button is a button found in a message's blocks.
type button struct {
	BlockID, ActionID, Value, Text string
}

// findButton returns the button of blocks with actionID (or, when
// actionID is "", with value). A block without a block_id gets the one
// Slack would generate from its position.
func findButton(blocks json.RawMessage, actionID, value string) (button, bool) {
	var arr []blockJSON
	if json.Unmarshal(blocks, &arr) != nil {
		return button{}, false
	}
	for i, b := range arr {
		if b.Type != "actions" {
			continue
		}
		for _, e := range b.Elements {
			if e.Type != "button" || (actionID != "" && e.ActionID != actionID) || (actionID == "" && e.Value != value) {
				continue
			}
			id := b.BlockID
			if id == "" {
				id = fmt.Sprintf("blk%d", i)
			}
			bt := button{BlockID: id, ActionID: e.ActionID, Value: e.Value}
			if e.Text != nil {
				bt.Text = e.Text.Text
			}
			return bt, true
		}
	}
	return button{}, false
}
