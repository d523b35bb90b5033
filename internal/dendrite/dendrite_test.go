package dendrite

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

func TestMain(m *testing.M) { os.Exit(testkit.RunTests(m)) }

// TestServer registers two users on a real dendrite, and one sends the
// other a message in a room through mautrix; the other reads it by /sync.
func TestServer(t *testing.T) {
	s := Start(t)
	alice, bob := s.Register(t, "alice"), s.Register(t, "bob")
	if alice.UserID != "@alice:localhost" || alice.AccessToken == "" || alice.DeviceID == "" {
		t.Fatalf("alice's account: %+v", alice)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ac, bc := s.Client(t, alice), s.Client(t, bob)
	who, err := bc.Whoami(ctx)
	if err != nil || who.UserID != bob.UserID || who.DeviceID != bob.DeviceID {
		t.Fatalf("whoami as bob: %+v, %v", who, err)
	}

	room, err := ac.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", IsDirect: true, Invite: []id.UserID{bob.UserID}})
	if err != nil {
		t.Fatalf("create room: %v", err)
	}
	if _, err := bc.JoinRoomByID(ctx, room.RoomID); err != nil {
		t.Fatalf("bob joins: %v", err)
	}
	sent, err := ac.SendMessageEvent(ctx, room.RoomID, event.EventMessage, &event.MessageEventContent{MsgType: event.MsgText, Body: "hello bob"})
	if err != nil {
		t.Fatalf("send: %v", err)
	}

	// Bob's sync, from the start, until the message is there.
	since := ""
	for {
		resp, err := bc.SyncRequest(ctx, 5000, since, "", false, event.PresenceOffline)
		if err != nil {
			t.Fatalf("bob's sync: %v", err)
		}
		since = resp.NextBatch
		for _, evt := range resp.Rooms.Join[room.RoomID].Timeline.Events {
			if evt.ID != sent.EventID {
				continue
			}
			if err := evt.Content.ParseRaw(evt.Type); err != nil {
				t.Fatal(err)
			}
			if got := evt.Content.AsMessage().Body; got != "hello bob" || evt.Sender != alice.UserID {
				t.Fatalf("bob got %q from %s, want %q from %s", got, evt.Sender, "hello bob", alice.UserID)
			}
			return
		}
	}
}

// TestRegisterNeedsTheSecret: the homeserver takes no registration without
// the shared secret (it is not an open server).
func TestRegisterNeedsTheSecret(t *testing.T) {
	s := Start(t)
	cli, err := mautrix.NewClient(s.URL, "", "")
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = cli.Register(t.Context(), &mautrix.ReqRegister[any]{Username: "mallory", Password: "pw-0123456789", Auth: map[string]any{"type": "m.login.dummy"}})
	if err == nil {
		t.Fatal("open registration succeeded; want it refused")
	}
	s.secret = "wrong"
	if _, err := s.RegisterUser(t.Context(), "mallory"); err == nil || !strings.Contains(err.Error(), "403") && !strings.Contains(strings.ToLower(err.Error()), "forbidden") {
		t.Fatalf("registration with a wrong secret: %v; want it refused", err)
	}
}

// TestCIBuildsThisVersion: .ci/run builds the binaries of Version, so a
// bump of one is a bump of the other.
func TestCIBuildsThisVersion(t *testing.T) {
	data, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if want := "dendrite_version=" + Version; !strings.Contains(string(data), want) {
		t.Errorf(".ci/run does not set %s: the CI would build another dendrite than the tests expect", want)
	}
}
