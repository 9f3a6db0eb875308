// Command benchpeer is the Go benchmark peer of tubemq-aio: a small program of ours driving the
// official TubeMQ Go client (module tubemq-client-go).
//
//	benchpeer produce -master H:P -topic T -count N [-size B] [-concurrency W] [-warmup-seconds S]
//	benchpeer consume -master H:P -topic T -group G -count N [-warmup-seconds S] [-not-found-wait-ms MS]
//
// Exactly one JSON line is written to stdout at the end; diagnostics go to stderr. The Go
// producer only has a blocking SendMessage, so the concurrency W is W goroutines each sending
// synchronously. cpu_seconds is user+sys of this process (getrusage RUSAGE_SELF) over the
// measured phase only; the warm-up phase is excluded from every figure.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/apache/inlong/inlong-tubemq/tubemq-client-twins/tubemq-client-go/client"
	"github.com/apache/inlong/inlong-tubemq/tubemq-client-twins/tubemq-client-go/config"
	"github.com/apache/inlong/inlong-tubemq/tubemq-client-twins/tubemq-client-go/errs"
	"github.com/apache/inlong/inlong-tubemq/tubemq-client-twins/tubemq-client-go/log"
)

type result struct {
	Client         string  `json:"client"`
	Op             string  `json:"op"`
	Mode           string  `json:"mode"`
	Concurrency    int     `json:"concurrency"`
	Size           int     `json:"size"`
	Messages       int64   `json:"messages"`
	Bytes          int64   `json:"bytes"`
	Seconds        float64 `json:"seconds"`
	CPUSeconds     float64 `json:"cpu_seconds"`
	Errors         int64   `json:"errors"`
	WarmupMessages int64   `json:"warmup_messages"`
	ReadySeconds   float64 `json:"ready_seconds"`
	FirstError     *string `json:"first_error"`
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

func logf(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "[go-peer] "+format+"\n", args...)
}

func emit(r *result) {
	r.Client = "go"
	b, err := json.Marshal(r)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(b))
}

// phase counts the outcome of one phase (warm-up or measured).
type phase struct {
	ok       atomic.Int64
	errors   atomic.Int64
	mu       sync.Mutex
	firstErr *string
}

func (p *phase) fail(msg string) {
	p.errors.Add(1)
	p.mu.Lock()
	if p.firstErr == nil {
		p.firstErr = &msg
	}
	p.mu.Unlock()
}

// setupLogging sends the client's zap/lumberjack log to a file of our choosing: by default the
// library logs to "../log/tubemq.log" relative to the working directory.
func setupLogging(dir, level string) {
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "tubemq-benchpeer-go")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		logf("cannot create log dir %s: %v", dir, err)
		return
	}
	log.NewLogger(&log.OutputConfig{
		LogPath:    filepath.Join(dir, "tubemq-client.log"),
		Level:      level,
		MaxSize:    100,
		MaxBackups: 2,
		MaxAge:     1,
	})
}

// trySend calls SendMessage and turns the client's panic on an empty partition list (before
// its first heartbeat has delivered the topic's partitions) into an error.
func trySend(p client.Producer, msg *client.Message) (ok bool, code int32, text string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("send panicked (no partitions known yet?): %v", r)
		}
	}()
	ok, code, text = p.SendMessage(msg)
	return ok, code, text, nil
}

func produce(args []string) int {
	fs := flag.NewFlagSet("produce", flag.ExitOnError)
	master := fs.String("master", "127.0.0.1:8715", "master address host:port")
	topic := fs.String("topic", "", "topic")
	count := fs.Int64("count", 0, "messages to send in the measured phase")
	size := fs.Int("size", 1024, "payload bytes")
	conc := fs.Int("concurrency", 16, "goroutines, each sending synchronously")
	warmup := fs.Float64("warmup-seconds", 0, "warm-up traffic, excluded from the figures")
	readTimeoutMs := fs.Int("rpc-timeout-ms", 10000, "client read timeout")
	readyTimeout := fs.Float64("ready-timeout-seconds", 120, "max wait for the first successful send")
	heartbeatMs := fs.Int("heartbeat-ms", 2000, "client heartbeat period (partitions arrive with it)")
	logDir := fs.String("log-dir", "", "directory for the client library's log file")
	logLevel := fs.String("log-level", "warn", "client library log level")
	_ = fs.Parse(args)
	if *topic == "" || *count <= 0 || *conc <= 0 {
		fmt.Fprintln(os.Stderr, "produce: -topic and -count > 0 are required")
		return 2
	}
	setupLogging(*logDir, *logLevel)

	addr := fmt.Sprintf("%s?topic=%s&readTimeout=%d&heartbeatInterval=%d&logLevel=%s",
		*master, *topic, *readTimeoutMs, *heartbeatMs, *logLevel)
	cfg, err := config.ParseAddress(addr)
	res := &result{Op: "produce", Mode: "sync", Concurrency: *conc, Size: *size}
	if err != nil {
		msg := err.Error()
		res.Errors, res.FirstError = 1, &msg
		emit(res)
		return 1
	}
	cfg.Producer.Topics = []string{*topic}
	p, err := client.NewProducer(cfg)
	if err != nil {
		msg := "NewProducer: " + err.Error()
		res.Errors, res.FirstError = 1, &msg
		emit(res)
		return 1
	}

	payload := make([]byte, *size)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	newMsg := func() *client.Message {
		return &client.Message{Topic: *topic, Data: payload, DataLen: int32(len(payload))}
	}

	// The producer learns the topic's partitions from a heartbeat that runs after NewProducer
	// returns; sending before that panics inside the client. Poll with probe sends (they are
	// real messages and are counted as warm-up) instead of a fixed sleep.
	t0 := time.Now()
	deadline := t0.Add(time.Duration(*readyTimeout * float64(time.Second)))
	var probes int64
	for {
		ok, code, text, perr := trySend(p, newMsg())
		if ok {
			probes++
			break
		}
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("producer never became ready: code=%d msg=%s err=%v", code, text, perr)
			res.Errors, res.FirstError = 1, &msg
			emit(res)
			return 1
		}
		time.Sleep(100 * time.Millisecond)
	}
	res.ReadySeconds = time.Since(t0).Seconds()
	logf("producer ready after %.1fs", res.ReadySeconds)

	run := func(total int64, until time.Time) *phase {
		ph := &phase{}
		var issued atomic.Int64
		var wg sync.WaitGroup
		for g := 0; g < *conc; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					if !until.IsZero() && time.Now().After(until) {
						return
					}
					if issued.Add(1) > total {
						return
					}
					ok, code, text, serr := trySend(p, newMsg())
					switch {
					case serr != nil:
						ph.fail(serr.Error())
					case ok:
						ph.ok.Add(1)
					default:
						ph.fail(fmt.Sprintf("%d %s", code, text))
					}
				}
			}()
		}
		wg.Wait()
		return ph
	}

	warm := probes
	if *warmup > 0 {
		w := run(1<<62, time.Now().Add(time.Duration(*warmup*float64(time.Second))))
		warm += w.ok.Load()
		logf("warm-up: %d sent, %d errors", w.ok.Load(), w.errors.Load())
	}

	c0, w0 := cpuSeconds(), time.Now()
	ph := run(*count, time.Time{})
	wall, c1 := time.Since(w0).Seconds(), cpuSeconds()
	res.Messages = ph.ok.Load()
	res.Bytes = res.Messages * int64(*size)
	res.Seconds, res.CPUSeconds = wall, c1-c0
	res.Errors, res.FirstError = ph.errors.Load(), ph.firstErr
	res.WarmupMessages = warm
	emit(res)
	if res.Errors != 0 {
		return 1
	}
	return 0
}

func consume(args []string) int {
	fs := flag.NewFlagSet("consume", flag.ExitOnError)
	master := fs.String("master", "127.0.0.1:8715", "master address host:port")
	topic := fs.String("topic", "", "topic")
	group := fs.String("group", "", "consumer group")
	count := fs.Int64("count", 0, "messages to consume in the measured phase")
	warmup := fs.Float64("warmup-seconds", 0, "warm-up consumption, excluded from the figures")
	notFoundMs := fs.Int("not-found-wait-ms", 10, "broker-side wait when a partition has no new data")
	idleTimeout := fs.Float64("idle-timeout-seconds", 30, "stop after this long without a message")
	readTimeoutMs := fs.Int("rpc-timeout-ms", 10000, "client read timeout")
	heartbeatMs := fs.Int("heartbeat-ms", 2000, "client heartbeat period")
	logDir := fs.String("log-dir", "", "directory for the client library's log file")
	logLevel := fs.String("log-level", "warn", "client library log level")
	_ = fs.Parse(args)
	if *topic == "" || *group == "" || *count <= 0 {
		fmt.Fprintln(os.Stderr, "consume: -topic, -group and -count > 0 are required")
		return 2
	}
	setupLogging(*logDir, *logLevel)

	res := &result{Op: "consume", Mode: "pull", Concurrency: 1}
	addr := fmt.Sprintf("%s?topic=%s&group=%s&consumePosition=-1&msgNotFoundWait=%d"+
		"&readTimeout=%d&heartbeatInterval=%d&logLevel=%s",
		*master, *topic, *group, *notFoundMs, *readTimeoutMs, *heartbeatMs, *logLevel)
	cfg, err := config.ParseAddress(addr)
	if err != nil {
		msg := err.Error()
		res.Errors, res.FirstError = 1, &msg
		emit(res)
		return 1
	}
	c, err := client.NewConsumer(cfg)
	if err != nil {
		msg := "NewConsumer: " + err.Error()
		res.Errors, res.FirstError = 1, &msg
		emit(res)
		return 1
	}
	defer c.Close()

	var bytes int64
	// The Go consumer has no "partitions ready" call: GetMessage answers 406 until the master's
	// rebalance has assigned partitions. A phase therefore starts (wall clock and CPU) when the
	// first GetMessage that does not answer 406 was issued.
	var started bool
	var first time.Time
	var firstCPU float64
	pull := func(ph *phase, total int64, until time.Time) time.Time {
		last := time.Now()
		idle := time.Duration(*idleTimeout * float64(time.Second))
		for ph.ok.Load() < total {
			now := time.Now()
			if (!until.IsZero() && now.After(until)) || now.Sub(last) > idle {
				break
			}
			var callCPU float64
			if !started {
				callCPU = cpuSeconds()
			}
			cr, gerr := c.GetMessage()
			var te *errs.Error
			isErr := gerr != nil && errors.As(gerr, &te)
			if !started && !(isErr && te.Code == errs.RetErrNoPartAssigned) {
				started, first, firstCPU = true, now, callCPU
				last = now
			}
			if gerr != nil {
				if isErr && te.Code >= errs.RetErrNotFound && te.Code <= errs.RetErrAllPartInUse {
					// no data / no partition yet / all busy: normal in pull mode; the client
					// already released the partition.
					if te.Code != errs.RetErrNotFound {
						time.Sleep(time.Millisecond)
					}
					continue
				}
				ph.fail(gerr.Error())
				time.Sleep(5 * time.Millisecond)
				continue
			}
			if n := len(cr.Messages); n > 0 {
				var b int64
				for _, m := range cr.Messages {
					b += int64(len(m.Data))
				}
				ph.ok.Add(int64(n))
				bytes += b
				last = time.Now()
			}
			if _, cerr := c.Confirm(cr.ConfirmContext, true); cerr != nil {
				ph.fail("confirm: " + cerr.Error())
			}
		}
		return last
	}

	var warm int64
	if *warmup > 0 {
		w := &phase{}
		pull(w, 1<<62, time.Now().Add(time.Duration(*warmup*float64(time.Second))))
		warm = w.ok.Load()
		bytes = 0
		logf("warm-up: %d consumed", warm)
	}

	ph := &phase{}
	if started { // after a warm-up the measured phase starts right away
		first, firstCPU = time.Now(), cpuSeconds()
	}
	t0 := time.Now()
	last := pull(ph, *count, time.Time{})
	c1 := cpuSeconds()
	c0, w0 := firstCPU, first
	if !started {
		c0, w0 = c1, last
	}
	res.ReadySeconds = w0.Sub(t0).Seconds()
	res.Messages = ph.ok.Load()
	if res.Messages < *count {
		ph.fail(fmt.Sprintf("only %d of %d messages before idle timeout", res.Messages, *count))
	}
	// stop the clock at the last message, not at the end of an idle wait
	res.Seconds = last.Sub(w0).Seconds()
	res.CPUSeconds = c1 - c0
	res.Bytes = bytes
	if res.Messages > 0 {
		res.Size = int(bytes / res.Messages)
	}
	res.Errors, res.FirstError = ph.errors.Load(), ph.firstErr
	res.WarmupMessages = warm
	emit(res)
	if res.Errors != 0 {
		return 1
	}
	return 0
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: benchpeer produce|consume -master H:P -topic T ...")
		os.Exit(2)
	}
	if prof := os.Getenv("BENCHPEER_CPUPROFILE"); prof != "" {
		// optional: profile the whole run (set the variable to an output file path)
		if f, err := os.Create(prof); err == nil {
			if err := pprof.StartCPUProfile(f); err == nil {
				defer pprof.StopCPUProfile()
			}
		}
	}
	var rc int
	switch os.Args[1] {
	case "produce":
		rc = produce(os.Args[2:])
	case "consume":
		rc = consume(os.Args[2:])
	default:
		fmt.Fprintln(os.Stderr, "unknown subcommand:", os.Args[1])
		rc = 2
	}
	pprof.StopCPUProfile()
	os.Exit(rc)
}
