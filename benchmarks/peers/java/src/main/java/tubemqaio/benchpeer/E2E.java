/*
 * End-to-end latency with the official TubeMQ Java client, the peer of tubemq-aio's e2e worker
 * (benchmarks/harness/e2e.py), written for this project.
 *
 *   Peer e2e --master H:P --topic T --group G --rate R --duration S [--size B]
 *            [--warmup-seconds S] [--not-found-wait-ms MS] [--heartbeat-ms MS]
 *            [--ready-timeout-seconds S] [--drain-seconds S]
 *
 * One JVM runs an async producer sending at a fixed offered rate (open loop: message i is due at
 * t0 + i / rate) and a pull consumer of a new group starting at the latest offset, with the
 * not-found wait given (10 ms in the harness). Each body starts with the message's intended send
 * time in nanoseconds since the epoch (8 bytes, big-endian), so a late sender shows up as
 * latency. The consumer records now - stamp when getMessage() returns the message, before
 * confirming. Latencies go into a log-bucketed histogram with the same buckets as the Python
 * worker (Histogram.java). cpu_seconds is the process CPU time over the
 * measured phase (producer and consumer together), as for tubemq-aio.
 */
package tubemqaio.benchpeer;

import java.nio.ByteBuffer;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;

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

final class E2E {
    private E2E() {
    }

    /** Wall clock in ns since the epoch, advanced by nanoTime (monotonic, high resolution). */
    private static final long WALL0 = System.currentTimeMillis() * 1_000_000L;
    private static final long NANO0 = System.nanoTime();

    private static long wallNanos() {
        return WALL0 + (System.nanoTime() - NANO0);
    }

    static int run(Peer.Args args) throws Exception {
        String master = args.str("master", null);
        String topic = args.str("topic", null);
        String group = args.str("group", null);
        double rate = args.dbl("rate", null);
        double duration = args.dbl("duration", null);
        int size = Math.max(8, (int) args.num("size", "1024"));
        double warmup = args.dbl("warmup-seconds", "0");
        long notFoundWaitMs = args.num("not-found-wait-ms", "10");
        long heartbeatMs = args.num("heartbeat-ms", "2000");
        double readyTimeout = args.dbl("ready-timeout-seconds", "120");
        double drain = args.dbl("drain-seconds", "10");

        TubeClientConfig cfg = new TubeClientConfig(master);
        cfg.setHeartbeatPeriodMs(heartbeatMs);
        MessageSessionFactory factory = new TubeSingleSessionFactory(cfg);
        MessageProducer producer = factory.createProducer();
        ConsumerConfig cc = new ConsumerConfig(master, group);
        cc.setHeartbeatPeriodMs(heartbeatMs);
        cc.setConsumePosition(ConsumePosition.CONSUMER_FROM_LATEST_OFFSET);
        cc.setMsgNotFoundWaitPeriodMs(notFoundWaitMs);
        PullMessageConsumer consumer = factory.createPullConsumer(cc);
        try {
            producer.publish(Collections.singleton(topic));
            consumer.subscribe(topic, null);
            consumer.completeSubscribe();
            long readyStart = System.nanoTime();
            long deadline = readyStart + (long) (readyTimeout * 1e9);
            while (!consumer.isPartitionsReady(1000) || !producer.isTopicCurAcceptPublish(topic)) {
                if (System.nanoTime() > deadline) {
                    Peer.log("not ready within " + readyTimeout + " s");
                    return 1;
                }
            }
            // Let the first fetches fix the start offsets before anything is sent.
            long settleEnd = System.nanoTime() + 1_000_000_000L;
            while (System.nanoTime() < settleEnd) {
                consumer.getMessage();
            }
            double readySeconds = (System.nanoTime() - readyStart) / 1e9;

            long total = (long) (rate * (warmup + duration));
            long measured = total - (long) (rate * warmup);
            long start = wallNanos();
            long measureFrom = start + (long) (warmup * 1e9);
            double step = 1e9 / rate;
            Histogram hist = new Histogram();
            Set<Long> seen = new HashSet<>();
            long[] duplicates = new long[1];
            AtomicLong sendErrors = new AtomicLong();
            String[] firstError = new String[1];

            Thread receiver = new Thread(() -> {
                long idleEnd = Long.MAX_VALUE;
                while (seen.size() < measured && System.nanoTime() < idleEnd) {
                    try {
                        ConsumerResult r = consumer.getMessage();
                        long now = wallNanos();
                        if (r.isSuccess()) {
                            List<Message> msgs = r.getMessageList();
                            if (msgs != null) {
                                for (Message m : msgs) {
                                    long stamp = ByteBuffer.wrap(m.getData(), 0, 8).getLong();
                                    if (stamp < measureFrom) {
                                        continue;
                                    }
                                    if (!seen.add(stamp)) {
                                        duplicates[0]++;
                                        continue;
                                    }
                                    hist.record((now - stamp) / 1000.0);
                                }
                            }
                            consumer.confirmConsume(r.getConfirmContext(), true);
                        }
                    } catch (Exception e) {
                        if (Thread.currentThread().isInterrupted()) {
                            return;
                        }
                        Peer.log("e2e receiver: " + e);
                    }
                    if (idleEnd == Long.MAX_VALUE
                            && wallNanos() > start + (long) ((warmup + duration + drain) * 1e9)) {
                        idleEnd = 0; // drain time is over: what is missing stays missing
                    }
                }
            }, "e2e-receiver");
            receiver.setDaemon(true);

            MessageSentCallback callback = new MessageSentCallback() {
                @Override
                public void onMessageSent(MessageSentResult r) {
                    if (!r.isSuccess()) {
                        sendErrors.incrementAndGet();
                        if (firstError[0] == null) {
                            firstError[0] = "send " + r.getErrCode() + " " + r.getErrMsg();
                        }
                    }
                }

                @Override
                public void onException(Throwable t) {
                    sendErrors.incrementAndGet();
                    if (firstError[0] == null) {
                        firstError[0] = String.valueOf(t);
                    }
                }
            };

            long cpu0 = Peer.processCpuNanos();
            receiver.start();
            for (long i = 0; i < total; i++) {
                long intended = start + (long) (i * step);
                long delay = intended - wallNanos();
                if (delay > 0) {
                    Thread.sleep(delay / 1_000_000L, (int) (delay % 1_000_000L));
                }
                byte[] body = new byte[size];
                ByteBuffer.wrap(body).putLong(intended);
                for (int k = 8; k < size; k++) {
                    body[k] = 'x';
                }
                try {
                    producer.sendMessage(new Message(topic, body), callback);
                } catch (Throwable t) {
                    callback.onException(t);
                }
            }
            long sentEnd = wallNanos();
            receiver.join((long) (drain * 1000) + 1000);
            long cpu1 = Peer.processCpuNanos();
            if (receiver.isAlive()) {
                receiver.interrupt();
                receiver.join(5000);
            }
            long received = seen.size();
            long missing = Math.max(0, measured - sendErrors.get() - received);
            String err = firstError[0];
            if (err == null && missing > 0) {
                err = missing + " sent message(s) never reached the consumer";
            }
            String line = String.format(Locale.ROOT,
                    "{\"client\":\"java\",\"op\":\"e2e\",\"mode\":\"e2e\",\"concurrency\":1,"
                            + "\"size\":%d,\"rate\":%.1f,\"messages\":%d,\"bytes\":%d,"
                            + "\"seconds\":%.6f,\"cpu_seconds\":%.6f,\"errors\":%d,\"missing\":%d,"
                            + "\"duplicates\":%d,\"warmup_messages\":%d,\"ready_seconds\":%.3f,"
                            + "\"not_found_wait_ms\":%d,\"first_error\":%s,\"latency\":%s,"
                            + "\"latency_cdf\":%s}",
                    size, rate, received, received * size, (sentEnd - measureFrom) / 1e9,
                    (cpu1 - cpu0) / 1e9, sendErrors.get() + missing, missing, duplicates[0],
                    total - measured, readySeconds, notFoundWaitMs,
                    err == null ? "null" : Peer.jsonString(err), hist.summaryJson(),
                    hist.cdfJson());
            System.out.println(line);
            System.out.flush();
            return sendErrors.get() == 0 && missing == 0 ? 0 : 1;
        } finally {
            try {
                consumer.shutdown();
                producer.shutdown();
                factory.shutdown();
            } catch (Throwable t) {
                Peer.log("shutdown: " + t);
            }
        }
    }
}
