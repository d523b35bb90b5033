package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/switchboard-gateway/switchboard/internal/waitfor"

	"github.com/switchboard-gateway/switchboard/bench/internal/gateway"
	"github.com/switchboard-gateway/switchboard/config"
)

// memoryResult is rows 2 and 7 for one binary: as built (the freshly
// linked file, whole in the page cache) or as deployed (a copy whose pages
// were dropped from the cache, as after a deploy or a reboot).
type memoryResult struct {
	deployed bool
	turns    int
	idle     gateway.Memory  // settle after ready, nothing sent yet
	end      gateway.Memory  // at the last reply of the conversation
	after    gateway.Memory  // settleAfter later
	replies  []time.Duration // each turn's message to its reply; the first after settle idle
}

// Waits of the memory phase: idle is read settle after the process was
// ready (past the GC pacer's quiet time, internal/gcpace.Quiet, so that
// start-up's garbage is gone as it is on a gateway that has been up a
// while), and again settleAfter the conversation's last reply.
const (
	settle      = 10 * time.Second
	settleAfter = 30 * time.Second
)

// measureMemory starts bin (as built, or a deployed copy of it), reads its
// memory once idle, holds a conversation of turns turns in one chat with
// the default context window (the model answering at once), and reads it at
// the last reply and settleAfter later.
func measureMemory(ctx context.Context, bin, root string, s settings, turns int, deployed bool) (memoryResult, error) {
	res := memoryResult{deployed: deployed, turns: turns}
	if deployed {
		dir, err := os.MkdirTemp(root, "deploy-")
		if err != nil {
			return res, err
		}
		if bin, err = gateway.Deploy(bin, dir); err != nil {
			return res, err
		}
	}
	s.ContextWindow = config.Default().LLM.ContextWindow
	r, err := startRig(ctx, bin, root, s)
	if err != nil {
		return res, err
	}
	fail := func(err error) (memoryResult, error) {
		r.kill()
		return res, err
	}
	ready := time.Now()
	r.model.SetDefault(answer(0))
	r.model.DiscardRequests() // the fakes' own memory is not what is measured
	if err := r.dc.WaitFor(ctx, func() bool { return r.dc.Identifies() > 0 }); err != nil {
		return fail(err)
	}
	if waitfor.Sleep(ctx, settle-time.Since(ready)) != nil {
		return fail(ctx.Err())
	}
	if res.idle, err = r.proc.Memory(); err != nil {
		return fail(err)
	}
	if res.replies, err = converse(ctx, r, turns); err != nil {
		return fail(err)
	}
	if res.end, err = r.proc.Memory(); err != nil {
		return fail(err)
	}
	if waitfor.Sleep(ctx, settleAfter) != nil {
		return fail(ctx.Err())
	}
	if res.after, err = r.proc.Memory(); err != nil {
		return fail(err)
	}
	return res, r.stop()
}

// converse holds a conversation of turns turns in chat 1: each user
// message (userText) is sent when the reply to the previous one arrived.
// It returns the time from each message to its reply.
func converse(ctx context.Context, r *rig, turns int) ([]time.Duration, error) {
	base := r.tg.Calls("sendMessage")
	times := make([]time.Duration, 0, turns)
	for t := 1; t <= turns; t++ {
		start := time.Now()
		r.tg.PushText(1, 1, "alice", userText(t))
		if err := r.tg.WaitCalls(ctx, "sendMessage", base+t); err != nil {
			return times, fmt.Errorf("turn %d: %w", t, err)
		}
		times = append(times, time.Since(start))
	}
	return times, nil
}
