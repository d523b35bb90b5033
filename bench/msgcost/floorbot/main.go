// Command floorbot is the floor bench/msgcost measures the gateway
// against: the least a Telegram bot on the gateway's three libraries
// (tgbotapi, go-openai, go-sqlite3 with the gateway's connection
// settings) does for a message: one long poll, one insert of the
// message, one model call, one insert of the answer, one sendMessage.
// No pacing, no history, no tools, no retries.
//
//	floorbot -api URL -token T -model URL -db PATH
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
	_ "github.com/mattn/go-sqlite3"
	openai "github.com/sashabaranov/go-openai"
)

func main() {
	api := flag.String("api", "", "Bot API base URL")
	token := flag.String("token", "", "bot token")
	model := flag.String("model", "", "OpenAI-compatible base URL (…/v1)")
	dbPath := flag.String("db", "", "SQLite file")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *api, *token, *model, *dbPath); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, api, token, model, dbPath string) error {
	db, err := sql.Open("sqlite3", "file:"+dbPath+"?_journal_mode=WAL&_busy_timeout=5000&_foreign_keys=on&_synchronous=NORMAL&_txlock=immediate")
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY, chat INTEGER NOT NULL, role TEXT NOT NULL, text TEXT NOT NULL)`); err != nil {
		return err
	}
	bot, err := tgbotapi.NewBotAPIWithAPIEndpoint(token, api+"/bot%s/%s")
	if err != nil {
		return err
	}
	cfg := openai.DefaultConfig("sk-floor")
	cfg.BaseURL = model
	llm := openai.NewClientWithConfig(cfg)
	offset := 0
	for ctx.Err() == nil {
		updates, err := bot.GetUpdates(tgbotapi.UpdateConfig{Offset: offset, Timeout: 1})
		if err != nil {
			log.Print(err)
			continue
		}
		for _, u := range updates {
			offset = u.UpdateID + 1
			if u.Message == nil {
				continue
			}
			if err := answer(ctx, db, bot, llm, u.Message); err != nil {
				log.Print(err)
			}
		}
	}
	return nil
}

func answer(ctx context.Context, db *sql.DB, bot *tgbotapi.BotAPI, llm *openai.Client, m *tgbotapi.Message) error {
	chat := m.Chat.ID
	if _, err := db.ExecContext(ctx, `INSERT INTO messages (chat, role, text) VALUES (?, 'user', ?)`, chat, m.Text); err != nil {
		return err
	}
	resp, err := llm.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "fake-model",
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: m.Text}}})
	if err != nil {
		return err
	}
	if len(resp.Choices) == 0 {
		return fmt.Errorf("no choices")
	}
	text := resp.Choices[0].Message.Content
	if _, err := db.ExecContext(ctx, `INSERT INTO messages (chat, role, text) VALUES (?, 'assistant', ?)`, chat, text); err != nil {
		return err
	}
	_, err = bot.Send(tgbotapi.NewMessage(chat, text))
	return err
}
