/*
 * Open-loop send latency with the official TubeMQ Java client, the peer of tubemq-aio's latency
 * worker (benchmarks/harness/latency.py), written for this project.
 *
 *   Peer latency --master H:P --topic T --rate R --duration S [--size B] [--warmup-seconds S]
 *                [--rpc-timeout-ms MS] [--heartbeat-ms MS] [--ready-timeout-seconds S]
 *                [--drain-seconds S]
 *
 * Message i of a phase is due at t0 + i / rate. The sender thread sleeps until then and calls the
 * asynchronous sendMessage(msg, callback); it never waits for answers, so a slow answer does not
 * delay the next send (open loop). Each latency is measured from the message's *intended* send
 * time to its callback, so a stalled sender or broker shows up as latency of every message that
 * was due meanwhile (no coordinated omission). The warm-up phase (same rate) runs first and its
 * answers are awaited before the measured phase starts, as in the Python worker.
 *
 * One JSON line on stdout, shaped like the Python worker's: messages (acknowledged sends),
 * seconds (first due time to the last answer), cpu_seconds (process CPU over the measured phase),
 * latency (p50/p90/p99/p99.9/max in ms), latency_cdf, and schedule_lag: how late the send calls
 * were issued against their due times (the sender's own share of the latency).
 */
package tubemqaio.benchpeer;

import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

import org.apache.inlong.tubemq.client.producer.MessageProducer;
import org.apache.inlong.tubemq.client.producer.MessageSentCallback;
import org.apache.inlong.tubemq.client.producer.MessageSentResult;
import org.apache.inlong.tubemq.corebase.Message;

final class Latency {
    private Latency() {
    }

    /** Outcome of one fixed-rate phase. */
    private static final class Phase {
        final Histogram latency = new Histogram();
        final Histogram lag = new Histogram();
        final AtomicLong ok = new AtomicLong();
        final AtomicLong errors = new AtomicLong();
        final AtomicLong done = new AtomicLong();
        final AtomicLong lastDone = new AtomicLong();
        volatile String firstError;
        long sent;
        double seconds;

        void fail(String what) {
            errors.incrementAndGet();
            if (firstError == null) {
                firstError = what;
            }
        }
    }

    /** One callback per message: it knows the message's intended send time. */
    private static final class Answer implements MessageSentCallback {
        private final Phase phase;
        private final long intended;

        Answer(Phase phase, long intended) {
            this.phase = phase;
            this.intended = intended;
        }

        @Override
        public void onMessageSent(MessageSentResult r) {
            long now = System.nanoTime();
            if (r.isSuccess()) {
                phase.latency.record((now - intended) / 1000.0);
                phase.ok.incrementAndGet();
            } else {
                phase.fail("send " + r.getErrCode() + " " + r.getErrMsg());
            }
            finish(now);
        }

        @Override
        public void onException(Throwable t) {
            phase.fail(String.valueOf(t));
            finish(System.nanoTime());
        }

        private void finish(long now) {
            phase.lastDone.accumulateAndGet(now, Math::max);
            phase.done.incrementAndGet();
        }
    }

    /** Send {@code rate * seconds} messages on schedule, then wait (at most drain s) for answers. */
    private static Phase phase(MessageProducer producer, String topic, byte[] payload, double rate,
                               double seconds, double drain) throws InterruptedException {
        Phase phase = new Phase();
        long n = (long) (rate * seconds);
        double step = 1e9 / rate;
        long t0 = System.nanoTime();
        phase.lastDone.set(t0);
        for (long i = 0; i < n; i++) {
            long intended = t0 + (long) (i * step);
            long delay;
            while ((delay = intended - System.nanoTime()) > 0) { // parkNanos may return early
                LockSupport.parkNanos(delay);
                if (Thread.interrupted()) {
                    throw new InterruptedException();
                }
            }
            phase.lag.record(Math.max(0, System.nanoTime() - intended) / 1000.0);
            Answer answer = new Answer(phase, intended);
            try {
                producer.sendMessage(new Message(topic, payload), answer);
            } catch (Throwable t) {
                answer.onException(t);
            }
            phase.sent++;
        }
        long deadline = System.nanoTime() + (long) (drain * 1e9);
        while (phase.done.get() < n && System.nanoTime() < deadline) {
            TimeUnit.MILLISECONDS.sleep(1);
        }
        long missing = n - phase.done.get();
        if (missing > 0) {
            phase.errors.addAndGet(missing);
            if (phase.firstError == null) {
                phase.firstError = missing + " send(s) unanswered after " + drain + " s";
            }
            phase.lastDone.accumulateAndGet(System.nanoTime(), Math::max);
        }
        phase.sent = n;
        phase.seconds = (phase.lastDone.get() - t0) / 1e9;
        return phase;
    }

    static int run(Peer.Args args) throws Exception {
        String master = args.str("master", null);
        String topic = args.str("topic", null);
        double rate = args.dbl("rate", null);
        double duration = args.dbl("duration", null);
        int size = (int) args.num("size", "1024");
        double warmup = args.dbl("warmup-seconds", "0");
        long rpcTimeoutMs = args.num("rpc-timeout-ms", "10000");
        long heartbeatMs = args.num("heartbeat-ms", "2000");
        double readyTimeout = args.dbl("ready-timeout-seconds", "120");
        double drain = args.dbl("drain-seconds", "30");
        if (!(rate > 0) || !(duration > 0)) {
            throw new IllegalArgumentException("--rate and --duration must be > 0");
        }
        byte[] payload = Peer.payload(size);

        try (ProducerSession session = new ProducerSession(master, topic, rpcTimeoutMs,
                heartbeatMs, readyTimeout)) {
            MessageProducer producer = session.producer;
            double readySeconds = session.readySeconds;
            if (readySeconds < 0) {
                return 1;
            }
            long warmupMessages = 0;
            if (warmup > 0) {
                Phase w = phase(producer, topic, payload, rate, warmup, drain);
                warmupMessages = w.sent;
                Peer.log("warm-up: " + w.ok.get() + " acknowledged, " + w.errors.get() + " errors");
            }
            long cpu0 = Peer.processCpuNanos();
            Phase p = phase(producer, topic, payload, rate, duration, drain);
            long cpu1 = Peer.processCpuNanos();
            long ok = p.ok.get();
            String err = p.firstError;
            String line = String.format(Locale.ROOT,
                    "{\"client\":\"java\",\"op\":\"latency\",\"mode\":\"open\",\"concurrency\":1,"
                            + "\"size\":%d,\"rate\":%.1f,\"messages\":%d,\"bytes\":%d,"
                            + "\"seconds\":%.6f,\"cpu_seconds\":%.6f,\"errors\":%d,"
                            + "\"warmup_messages\":%d,\"ready_seconds\":%.3f,\"first_error\":%s,"
                            + "\"latency\":%s,\"schedule_lag\":%s,\"latency_cdf\":%s}",
                    size, rate, ok, ok * size, p.seconds, (cpu1 - cpu0) / 1e9,
                    p.errors.get(), warmupMessages, readySeconds,
                    err == null ? "null" : Peer.jsonString(err), p.latency.summaryJson(),
                    p.lag.summaryJson(), p.latency.cdfJson());
            System.out.println(line);
            System.out.flush();
            return p.errors.get() == 0 ? 0 : 1;
        }
    }
}
