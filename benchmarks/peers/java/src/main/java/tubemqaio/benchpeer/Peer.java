/*
 * Java benchmark peer for tubemq-aio, written for this project against the official TubeMQ Java
 * client (org.apache.inlong:tubemq-client).
 *
 *   Peer produce --master H:P --topic T --count N [--size B] [--concurrency W] [--mode sync|async]
 *                [--warmup-seconds S] [--rpc-timeout-ms MS] [--ready-timeout-seconds S]
 *                [--heartbeat-ms MS]
 *   Peer consume --master H:P --topic T --group G --count N [--warmup-seconds S]
 *                [--not-found-wait-ms MS] [--idle-timeout-seconds S] [--ready-timeout-seconds S]
 *                [--heartbeat-ms MS]
 *   Peer e2e --master H:P --topic T --group G --rate R --duration S [--size B]
 *                [--warmup-seconds S] [--not-found-wait-ms MS] (see E2E.java)
 *   Peer latency --master H:P --topic T --rate R --duration S [--size B]
 *                [--warmup-seconds S] (open-loop send latency, see Latency.java)
 *
 * --heartbeat-ms (default 2000, same as the Go peer) only shortens the start-up: partitions
 * reach the client with a heartbeat.
 *
 * Exactly one JSON line goes to stdout at the end; progress and diagnostics go to stderr.
 * sync mode: W threads each call the blocking sendMessage(). async mode: one thread issues
 * sendMessage(msg, callback) with at most W messages in flight (a semaphore released by the
 * callback). The warm-up phase (same workers, same settings) is excluded from every figure.
 * cpu_seconds is the process CPU time (user+sys, all threads incl. JIT and GC) of this JVM over
 * the measured phase only.
 */
package tubemqaio.benchpeer;

import java.lang.management.ManagementFactory;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;

import org.apache.inlong.tubemq.client.config.ConsumerConfig;
import org.apache.inlong.tubemq.client.config.TubeClientConfig;
import org.apache.inlong.tubemq.client.consumer.ConsumePosition;
import org.apache.inlong.tubemq.client.consumer.ConsumerResult;
import org.apache.inlong.tubemq.client.consumer.PullMessageConsumer;
import org.apache.inlong.tubemq.client.factory.MessageSessionFactory;
import org.apache.inlong.tubemq.client.factory.TubeSingleSessionFactory;
import org.apache.inlong.tubemq.client.producer.MessageProducer;
import org.apache.inlong.tubemq.client.producer.MessageSentCallback;
import org.apache.inlong.tubemq.client.producer.MessageSentResult;
import org.apache.inlong.tubemq.corebase.Message;

public final class Peer {

    private Peer() {
    }

    /** Minimal "--key value" parser. */
    static final class Args {
        private final Map<String, String> values = new HashMap<>();

        Args(String[] argv, int from) {
            for (int i = from; i < argv.length; i++) {
                String key = argv[i];
                if (!key.startsWith("--") || i + 1 >= argv.length) {
                    throw new IllegalArgumentException("expected --key value, got: " + key);
                }
                values.put(key.substring(2), argv[++i]);
            }
        }

        String str(String key, String dflt) {
            String v = values.get(key);
            if (v == null) {
                if (dflt == null) {
                    throw new IllegalArgumentException("missing --" + key);
                }
                return dflt;
            }
            return v;
        }

        long num(String key, String dflt) {
            return Long.parseLong(str(key, dflt));
        }

        double dbl(String key, String dflt) {
            return Double.parseDouble(str(key, dflt));
        }
    }

    static long processCpuNanos() {
        java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        if (os instanceof com.sun.management.OperatingSystemMXBean) {
            return ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime();
        }
        return -1L;
    }

    static void log(String msg) {
        System.err.println("[java-peer] " + msg);
        System.err.flush();
    }

    static String jsonString(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    /** A {@code size}-byte printable body, the same bytes as the Python worker's. */
    static byte[] payload(int size) {
        byte[] payload = new byte[size];
        for (int i = 0; i < size; i++) {
            payload[i] = (byte) ('a' + (i % 26));
        }
        return payload;
    }

    private static void emit(String op, String mode, long concurrency, long size, long messages,
                             long bytes, double seconds, double cpuSeconds, long errors,
                             long warmupMessages, double readySeconds, String firstError) {
        String line = String.format(Locale.ROOT,
                "{\"client\":\"java\",\"op\":%s,\"mode\":%s,\"concurrency\":%d,\"size\":%d,"
                        + "\"messages\":%d,\"bytes\":%d,\"seconds\":%.6f,\"cpu_seconds\":%.6f,"
                        + "\"errors\":%d,\"warmup_messages\":%d,\"ready_seconds\":%.3f,"
                        + "\"first_error\":%s}",
                jsonString(op), jsonString(mode), concurrency, size, messages, bytes, seconds,
                cpuSeconds, errors, warmupMessages, readySeconds,
                firstError == null ? "null" : jsonString(firstError));
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] argv) throws Exception {
        if (argv.length < 1) {
            System.err.println("usage: Peer produce|consume|e2e|latency --master H:P --topic T ...");
            System.exit(2);
        }
        Args args = new Args(argv, 1);
        int rc;
        switch (argv[0]) {
            case "produce":
                rc = produce(args);
                break;
            case "consume":
                rc = consume(args);
                break;
            case "e2e":
                rc = E2E.run(args);
                break;
            case "latency":
                rc = Latency.run(args);
                break;
            default:
                System.err.println("unknown subcommand: " + argv[0]);
                rc = 2;
        }
        // netty / timer threads of the client are not all daemons: leave explicitly.
        System.exit(rc);
    }

    // ------------------------------------------------------------------ produce

    /** Counters shared by the sender threads or callbacks of one phase. */
    private static final class Phase {
        final AtomicLong ok = new AtomicLong();
        final AtomicLong errors = new AtomicLong();
        volatile String firstError;

        void fail(String what) {
            errors.incrementAndGet();
            if (firstError == null) {
                firstError = what;
            }
        }
    }

    private static int produce(Args args) throws Exception {
        String master = args.str("master", null);
        String topic = args.str("topic", null);
        long count = args.num("count", null);
        int size = (int) args.num("size", "1024");
        int concurrency = (int) args.num("concurrency", "16");
        String mode = args.str("mode", "sync");
        double warmup = args.dbl("warmup-seconds", "0");
        long rpcTimeoutMs = args.num("rpc-timeout-ms", "10000");
        long heartbeatMs = args.num("heartbeat-ms", "2000");
        double readyTimeout = args.dbl("ready-timeout-seconds", "120");
        if (!mode.equals("sync") && !mode.equals("async")) {
            throw new IllegalArgumentException("--mode must be sync or async");
        }

        byte[] payload = payload(size);

        try (ProducerSession session = new ProducerSession(master, topic, rpcTimeoutMs,
                heartbeatMs, readyTimeout)) {
            MessageProducer producer = session.producer;
            double readySeconds = session.readySeconds;
            if (readySeconds < 0) {
                emit("produce", mode, concurrency, size, 0, 0, 0.0, 0.0, 1, 0,
                        readyTimeout, "topic not publishable");
                return 1;
            }

            long warmupMessages = 0;
            if (warmup > 0) {
                long end = System.nanoTime() + (long) (warmup * 1e9);
                Phase w = runProduce(producer, topic, payload, concurrency, mode, Long.MAX_VALUE,
                        () -> System.nanoTime() < end ? 1 : 0);
                warmupMessages = w.ok.get();
                log("warm-up: " + warmupMessages + " sent, " + w.errors.get() + " errors");
            }

            long cpu0 = processCpuNanos();
            long t0 = System.nanoTime();
            Phase p = runProduce(producer, topic, payload, concurrency, mode, count, () -> 1);
            long t1 = System.nanoTime();
            long cpu1 = processCpuNanos();
            long ok = p.ok.get();
            emit("produce", mode, concurrency, size, ok, ok * size, (t1 - t0) / 1e9,
                    (cpu1 - cpu0) / 1e9, p.errors.get(), warmupMessages, readySeconds, p.firstError);
            return p.errors.get() == 0 ? 0 : 1;
        }
    }

    /**
     * Send up to {@code total} messages (attempts) while {@code go} returns non-zero, with
     * {@code concurrency} blocking threads (sync) or at most {@code concurrency} in flight (async).
     */
    private static Phase runProduce(MessageProducer producer, String topic, byte[] payload,
                                    int concurrency, String mode, long total, LongSupplier go)
            throws InterruptedException {
        Phase phase = new Phase();
        AtomicLong issued = new AtomicLong();
        if (mode.equals("sync")) {
            Thread[] threads = new Thread[concurrency];
            for (int i = 0; i < concurrency; i++) {
                threads[i] = new Thread(() -> {
                    while (go.getAsLong() != 0 && issued.getAndIncrement() < total) {
                        try {
                            MessageSentResult r = producer.sendMessage(new Message(topic, payload));
                            if (r.isSuccess()) {
                                phase.ok.incrementAndGet();
                            } else {
                                phase.fail(r.getErrCode() + " " + r.getErrMsg());
                            }
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                            return;
                        } catch (Throwable t) {
                            phase.fail(String.valueOf(t));
                        }
                    }
                }, "sender-" + i);
                threads[i].start();
            }
            for (Thread t : threads) {
                t.join();
            }
            return phase;
        }
        Semaphore window = new Semaphore(concurrency);
        AtomicLong completed = new AtomicLong();
        MessageSentCallback cb = new MessageSentCallback() {
            @Override
            public void onMessageSent(MessageSentResult r) {
                if (r.isSuccess()) {
                    phase.ok.incrementAndGet();
                } else {
                    phase.fail(r.getErrCode() + " " + r.getErrMsg());
                }
                completed.incrementAndGet();
                window.release();
            }

            @Override
            public void onException(Throwable t) {
                phase.fail(String.valueOf(t));
                completed.incrementAndGet();
                window.release();
            }
        };
        long sent = 0;
        while (go.getAsLong() != 0 && sent < total) {
            window.acquire();
            try {
                producer.sendMessage(new Message(topic, payload), cb);
                sent++;
            } catch (Throwable t) {
                phase.fail(String.valueOf(t));
                window.release();
                sent++;
                completed.incrementAndGet();
            }
        }
        // wait for every outstanding callback
        if (!window.tryAcquire(concurrency, 120, TimeUnit.SECONDS)) {
            phase.fail("timed out waiting for " + (sent - completed.get()) + " callbacks");
        }
        return phase;
    }

    // ------------------------------------------------------------------ consume

    private static int consume(Args args) throws Exception {
        String master = args.str("master", null);
        String topic = args.str("topic", null);
        String group = args.str("group", null);
        long count = args.num("count", null);
        double warmup = args.dbl("warmup-seconds", "0");
        long notFoundWaitMs = args.num("not-found-wait-ms", "10");
        double idleTimeout = args.dbl("idle-timeout-seconds", "30");
        double readyTimeout = args.dbl("ready-timeout-seconds", "120");
        long heartbeatMs = args.num("heartbeat-ms", "2000");

        TubeClientConfig cfg = new TubeClientConfig(master);
        cfg.setHeartbeatPeriodMs(heartbeatMs);
        MessageSessionFactory factory = new TubeSingleSessionFactory(cfg);
        ConsumerConfig cc = new ConsumerConfig(master, group);
        cc.setHeartbeatPeriodMs(heartbeatMs);
        cc.setConsumePosition(ConsumePosition.CONSUMER_FROM_FIRST_OFFSET);
        cc.setMsgNotFoundWaitPeriodMs(notFoundWaitMs);
        PullMessageConsumer consumer = factory.createPullConsumer(cc);
        try {
            consumer.subscribe(topic, null);
            consumer.completeSubscribe();
            long readyStart = System.nanoTime();
            long deadline = readyStart + (long) (readyTimeout * 1e9);
            while (!consumer.isPartitionsReady(1000)) {
                if (System.nanoTime() > deadline) {
                    emit("consume", "pull", 1, 0, 0, 0, 0.0, 0.0, 1, 0, readyTimeout,
                            "partitions not ready");
                    return 1;
                }
            }
            double readySeconds = (System.nanoTime() - readyStart) / 1e9;

            long warmupMessages = 0;
            if (warmup > 0) {
                long end = System.nanoTime() + (long) (warmup * 1e9);
                Phase w = new Phase();
                long[] wb = new long[1];
                pull(consumer, Long.MAX_VALUE, idleTimeout, end, w, wb);
                warmupMessages = w.ok.get();
                log("warm-up: " + warmupMessages + " consumed");
            }

            Phase p = new Phase();
            long[] bytes = new long[1];
            long cpu0 = processCpuNanos();
            long t0 = System.nanoTime();
            long lastAt = pull(consumer, count, idleTimeout, Long.MAX_VALUE, p, bytes);
            long cpu1 = processCpuNanos();
            long ok = p.ok.get();
            if (ok < count) {
                p.fail("only " + ok + " of " + count + " messages before idle timeout");
            }
            // stop the clock at the last message, not at the end of an idle wait
            double seconds = (Math.min(lastAt, System.nanoTime()) - t0) / 1e9;
            long avgSize = ok == 0 ? 0 : bytes[0] / ok;
            emit("consume", "pull", 1, avgSize, ok, bytes[0], seconds, (cpu1 - cpu0) / 1e9,
                    p.errors.get(), warmupMessages, readySeconds, p.firstError);
            return p.errors.get() == 0 ? 0 : 1;
        } finally {
            try {
                consumer.shutdown();
                factory.shutdown();
            } catch (Throwable t) {
                log("shutdown: " + t);
            }
        }
    }

    /** Pull until count messages, the end time, or idleTimeout without a message; returns the
     *  nanoTime of the last message received. */
    private static long pull(PullMessageConsumer consumer, long count, double idleTimeout,
                             long endNanos, Phase phase, long[] bytes) {
        long lastAt = System.nanoTime();
        long idleNanos = (long) (idleTimeout * 1e9);
        while (phase.ok.get() < count && System.nanoTime() < endNanos) {
            if (System.nanoTime() - lastAt > idleNanos) {
                break;
            }
            try {
                ConsumerResult r = consumer.getMessage();
                if (r.isSuccess()) {
                    List<Message> msgs = r.getMessageList();
                    if (msgs != null && !msgs.isEmpty()) {
                        long b = 0;
                        for (Message m : msgs) {
                            b += m.getData().length;
                        }
                        phase.ok.addAndGet(msgs.size());
                        bytes[0] += b;
                        lastAt = System.nanoTime();
                    }
                    ConsumerResult c = consumer.confirmConsume(r.getConfirmContext(), true);
                    if (!c.isSuccess()) {
                        phase.fail("confirm " + c.getErrCode() + " " + c.getErrMsg());
                    }
                } else if (r.getErrCode() < 404 || r.getErrCode() > 408) {
                    // 404 no message, 405 all partitions frozen, 406 none assigned yet,
                    // 407 all waiting, 408 all in use: normal pull-mode states, not errors.
                    phase.fail("get " + r.getErrCode() + " " + r.getErrMsg());
                    Thread.sleep(5);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            } catch (Throwable t) {
                phase.fail(String.valueOf(t));
            }
        }
        return lastAt;
    }
}
