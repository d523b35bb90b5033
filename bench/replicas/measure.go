package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// burst is one burst of chats: what was measured.
type burst struct {
	chats    int
	wall     time.Duration   // first update posted → last answer arrived
	ingested time.Duration   // first update posted → last update accepted (200) by the balancer
	posts    int64           // POSTs beyond one per update (not accepted the first time)
	lbRetry  int64           // forwards the balancer retried on another replica
	replies  []time.Duration // each sendMessage's arrival after the first post, in order
	notices  []notice        // messages other than the answers
	modelAt  []time.Duration // each model request's arrival, in order

	perReplica []replicaStats
	pgCPU      time.Duration // CPU of all postgres processes on this machine
	benchCPU   time.Duration // CPU of this program: fakes, balancer, sender
	machine    float64       // busy share of all cores during the burst, 0..1
	cores      int
	store      tableStats // the schema's counters over the burst (and the stop after it)
}

// notice is a message to a chat that is not its answer.
type notice struct {
	chat int64
	text string
}

// replicaStats is one replica's share of a burst.
type replicaStats struct {
	id       string
	cpu      time.Duration // utime+stime during the burst
	peakKB   int           // VmHWM during the burst (reset before it)
	peakAll  bool          // VmHWM could not be reset: it is the peak since start
	answers  int           // Telegram messages it sent (its /metrics): answers and notices
	accepted int           // updates it accepted from the balancer
	pgCPU    time.Duration // CPU of its PostgreSQL backends
	active   float64       // mean number of its backends running a query
	lockWait float64       // mean number of them waiting for a lock
}

// runBurst sends one message in each of chats first..first+n-1 at once (as
// Telegram delivers a backlog: one POST per update, all concurrent) and
// waits until every chat has its answer.
func runBurst(ctx context.Context, c *cluster, admin *sql.DB, client *http.Client, first, n int, timeout time.Duration) (burst, error) {
	res := burst{chats: n, cores: cpuCores()}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	// The updates, encoded before the clock starts.
	bodies := make([][]byte, n)
	for i := range n {
		id := int64(first + i)
		msg := c.tg.NewMessage(id, id, "user"+strconv.FormatInt(id, 10), fmt.Sprintf("hello from chat %d", id))
		b, err := json.Marshal(map[string]any{"update_id": 100000 + first + i, "message": msg})
		if err != nil {
			return res, err
		}
		bodies[i] = b
	}

	// Before.
	sentBase := len(c.tg.Sent())
	callBase := c.tg.Calls("sendMessage")
	modelBase := c.model.Calls()
	accBase := c.lb.acceptedBy()
	lbBase := c.lb.Retries()
	res.perReplica = make([]replicaStats, len(c.replicas))
	cpu0 := make([]time.Duration, len(c.replicas))
	sent0 := make([]float64, len(c.replicas))
	for i, r := range c.replicas {
		res.perReplica[i].id = r.id
		if resetPeakRSS(r.proc.Pid()) != nil {
			res.perReplica[i].peakAll = true
		}
		var err error
		if cpu0[i], err = r.proc.CPUTime(); err != nil {
			return res, err
		}
		if sent0[i], err = r.sentCounter(ctx); err != nil {
			return res, err
		}
	}
	backends0, err := backendCPU(ctx, admin, c)
	if err != nil {
		return res, err
	}
	pg0 := processCPU("postgres")
	self0 := selfCPU()
	busy0, total0 := machineCPU()

	sampler := startSampler(ctx, admin, c)
	start := time.Now()
	modelAt := make(chan []time.Duration, 1)
	go func() { // when the k-th model request arrived: shows where time goes
		var at []time.Duration
		for k := 1; k <= n; k++ {
			if c.model.WaitCalls(ctx, modelBase+k) != nil {
				break
			}
			at = append(at, time.Since(start))
		}
		modelAt <- at
	}()
	var posts, acceptedN atomic.Int64
	var lastAccepted atomic.Int64 // ns after start
	var postErr error
	var errOnce sync.Once
	var senders sync.WaitGroup
	for _, body := range bodies {
		senders.Go(func() {
			for {
				posts.Add(1)
				ok, err := post(ctx, client, c.hookURL, c.secret, body)
				if ok {
					acceptedN.Add(1)
					d := int64(time.Since(start))
					for {
						old := lastAccepted.Load()
						if d <= old || lastAccepted.CompareAndSwap(old, d) {
							break
						}
					}
					return
				}
				if ctx.Err() != nil {
					errOnce.Do(func() { postErr = fmt.Errorf("an update was not accepted: %v (%w)", err, ctx.Err()) })
					return
				}
				select { // Telegram posts a refused update again later
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
		})
	}
	// Wait for every chat's answer. Other messages (a notice that the
	// store is busy) are counted, not taken for answers.
	answered := map[int64]bool{}
	scanned := sentBase
	scan := func() error {
		sent := c.tg.Sent()
		for _, m := range sent[scanned:] {
			id := m.ChatID
			if id < int64(first) || id >= int64(first+n) {
				return fmt.Errorf("a message to chat %d, which sent nothing: %q", id, m.Text)
			}
			if m.Text != fmt.Sprintf("You said: hello from chat %d", id) {
				res.notices = append(res.notices, notice{id, m.Text})
				continue
			}
			if answered[id] {
				return fmt.Errorf("chat %d answered twice", id)
			}
			answered[id] = true
		}
		scanned = len(sent)
		return nil
	}
	for k := 1; len(answered) < n; k++ {
		if err := c.tg.WaitCalls(ctx, "sendMessage", callBase+k); err != nil {
			sampler.stop()
			senders.Wait()
			return res, fmt.Errorf("%d messages sent for %d chats, %d of %d updates accepted: %w", k-1, n, acceptedN.Load(), n, err)
		}
		res.replies = append(res.replies, time.Since(start))
		if k < n {
			continue
		}
		// The call counts on arrival; the message is recorded just after.
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, _ = c.tg.WaitSent(wctx, sentBase+k)
		cancel()
		if err := scan(); err != nil {
			sampler.stop()
			senders.Wait()
			return res, err
		}
	}
	res.wall = res.replies[len(res.replies)-1]
	senders.Wait()
	if postErr != nil {
		sampler.stop()
		return res, postErr
	}
	res.ingested = time.Duration(lastAccepted.Load())
	res.posts = posts.Load() - int64(n)
	res.modelAt = <-modelAt
	samples := sampler.stop()

	// After.
	busy1, total1 := machineCPU()
	if total1 > total0 {
		res.machine = float64(busy1-busy0) / float64(total1-total0)
	}
	res.benchCPU = selfCPU() - self0
	res.pgCPU = processCPU("postgres") - pg0
	backends1, err := backendCPU(ctx, admin, c)
	if err != nil {
		return res, err
	}
	res.lbRetry = c.lb.Retries() - lbBase
	acc := c.lb.acceptedBy()
	for i, r := range c.replicas {
		st := &res.perReplica[i]
		cpu1, err := r.proc.CPUTime()
		if err != nil {
			return res, err
		}
		st.cpu = cpu1 - cpu0[i]
		if st.peakKB, err = r.proc.StatusKB("VmHWM"); err != nil {
			return res, err
		}
		// The counter is incremented after the Bot API answered: give the
		// last sends a moment to be counted.
		for try := 0; ; try++ {
			s1, err := r.sentCounter(ctx)
			if err != nil {
				return res, err
			}
			st.answers = int(s1 - sent0[i])
			if try == 20 || sumAnswers(res.perReplica) >= n+len(res.notices) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		st.accepted = acc[r.id] - accBase[r.id]
		for pid, t := range backends1[r.id] {
			st.pgCPU += t - backends0[r.id][pid]
		}
		for _, s := range samples {
			st.active += float64(s[r.id].active) / float64(len(samples))
			st.lockWait += float64(s[r.id].lock) / float64(len(samples))
		}
	}

	// Nothing more arrived meanwhile; the model was asked once per chat.
	if err := scan(); err != nil {
		return res, err
	}
	if calls := c.model.Calls() - modelBase; calls != n {
		return res, fmt.Errorf("%d model calls for %d chats", calls, n)
	}
	if s := sumAnswers(res.perReplica); s != n+len(res.notices) {
		return res, fmt.Errorf("the replicas' /metrics count %d messages sent for %d answers and %d other messages", s, n, len(res.notices))
	}
	return res, nil
}

func sumAnswers(st []replicaStats) int {
	s := 0
	for _, r := range st {
		s += r.answers
	}
	return s
}

// post delivers one update as Telegram does; ok: it was accepted (200).
func post(ctx context.Context, client *http.Client, url, secret string, body []byte) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
	resp, err := client.Do(req)
	if err != nil {
		return false, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("the webhook answered %d", resp.StatusCode)
	}
	return true, nil
}

// ---- PostgreSQL activity ----

// backendCPU is the CPU time used so far by each replica's PostgreSQL
// backends (found by application_name in pg_stat_activity), by pid.
func backendCPU(ctx context.Context, admin *sql.DB, c *cluster) (map[string]map[int]time.Duration, error) {
	out := map[string]map[int]time.Duration{}
	byApp := map[string]string{}
	for _, r := range c.replicas {
		out[r.id] = map[int]time.Duration{}
		byApp[c.sc.appName(r.id)] = r.id
	}
	rows, err := admin.QueryContext(ctx, `SELECT pid, application_name FROM pg_stat_activity WHERE application_name LIKE $1`, c.sc.name+"_%")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		var app string
		if err := rows.Scan(&pid, &app); err != nil {
			return nil, err
		}
		if id, ok := byApp[app]; ok {
			if t, err := pidCPU(pid); err == nil {
				out[id][pid] = t
			}
		}
	}
	return out, rows.Err()
}

// activity is one sample of a replica's backends.
type activity struct{ active, lock int }

type sampler struct {
	cancel  context.CancelFunc
	done    chan struct{}
	samples []map[string]activity
}

// startSampler samples pg_stat_activity every 100 ms: how many of each
// replica's backends run a statement, and how many of them wait for a lock.
func startSampler(ctx context.Context, admin *sql.DB, c *cluster) *sampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &sampler{cancel: cancel, done: make(chan struct{})}
	byApp := map[string]string{}
	for _, r := range c.replicas {
		byApp[c.sc.appName(r.id)] = r.id
	}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			rows, err := admin.QueryContext(ctx, `SELECT application_name, COUNT(*) FILTER (WHERE state = 'active'),
				COUNT(*) FILTER (WHERE state = 'active' AND wait_event_type = 'Lock')
				FROM pg_stat_activity WHERE application_name LIKE $1 GROUP BY application_name`, c.sc.name+"_%")
			if err == nil {
				m := map[string]activity{}
				for rows.Next() {
					var app string
					var a activity
					if rows.Scan(&app, &a.active, &a.lock) == nil {
						m[byApp[app]] = a
					}
				}
				rows.Close()
				s.samples = append(s.samples, m)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *sampler) stop() []map[string]activity {
	s.cancel()
	<-s.done
	return s.samples
}

// ---- CPU ----

// pidCPU is utime+stime of a process, from /proc/PID/stat.
func pidCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad times", pid)
	}
	return time.Duration(utime+stime) * time.Second / 100, nil // USER_HZ
}

// processCPU sums the CPU time of every process named comm (postgres: the
// server and all its backends, whoever they serve).
func processCPU(comm string) time.Duration {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var sum time.Duration
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || strings.TrimSpace(string(b)) != comm {
			continue
		}
		if t, err := pidCPU(pid); err == nil {
			sum += t
		}
	}
	return sum
}

// machineCPU is the busy and total jiffies of all cores, from /proc/stat.
func machineCPU() (busy, total int64) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i >= 8 { // guest times are in user and nice already
			break
		}
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total
}

func cpuCores() int {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "cpu") && len(line) > 3 && line[3] >= '0' && line[3] <= '9' {
			n++
		}
	}
	return n
}

// selfCPU is the CPU time this program used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// percentile of sorted ts.
func percentile(ts []time.Duration, p float64) time.Duration {
	if len(ts) == 0 {
		return 0
	}
	s := slices.Clone(ts)
	slices.Sort(s)
	k := max(int(p/100*float64(len(s))+0.5), 1)
	return s[min(k, len(s))-1]
}

// ---- what the store did ----

// tableStats is what PostgreSQL counted for the schema's tables, plus the
// ids consumed without a row (inserts of transactions rolled back, mostly
// serialization failures retried).
type tableStats struct {
	writes int64 // rows inserted, updated or deleted
	scans  int64 // sequential and index scans started
	gaps   map[string]int64
}

// gapTables are the tables whose identity gaps are counted.
var gapTables = []string{"sessions", "turns", "messages", "deliveries"} // plain INSERTs: no ON CONFLICT upsert consumes ids

// readTableStats reads the schema's counters. The statistics a backend
// gathers reach pg_stat_user_tables when it is idle for a while or exits:
// read them after the replicas were quiet or stopped.
func readTableStats(ctx context.Context, admin *sql.DB, sc *schema) (tableStats, error) {
	st := tableStats{gaps: map[string]int64{}}
	if _, err := admin.ExecContext(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		return st, err
	}
	err := admin.QueryRowContext(ctx, `SELECT COALESCE(SUM(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint,
		COALESCE(SUM(seq_scan + COALESCE(idx_scan, 0)), 0)::bigint FROM pg_stat_user_tables WHERE schemaname = $1`, sc.name).Scan(&st.writes, &st.scans)
	if err != nil {
		return st, err
	}
	for _, t := range gapTables {
		var gap int64
		if err := admin.QueryRowContext(ctx, "SELECT COALESCE(MAX(id), 0) - COUNT(*) FROM "+sc.name+"."+t).Scan(&gap); err != nil {
			return st, err
		}
		st.gaps[t] = gap
	}
	return st, nil
}

func (a tableStats) minus(b tableStats) tableStats {
	d := tableStats{writes: a.writes - b.writes, scans: a.scans - b.scans, gaps: map[string]int64{}}
	for k, v := range a.gaps {
		d.gaps[k] = v - b.gaps[k]
	}
	return d
}
