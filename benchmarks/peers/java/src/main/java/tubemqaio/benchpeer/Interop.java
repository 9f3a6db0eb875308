/*
 * Interoperability tool for tubemq-aio's tests, written for this project against the official
 * TubeMQ Java client. It lets a test check our producer with the Java consumer and our consumer
 * with the Java producer, field by field.
 *
 *   Interop dump --master H:P --topic T --group G --count N [--idle-timeout-seconds S]
 *       consume N messages from the first offset; print one JSON line per message:
 *       {"body_b64":..,"attribute":<raw attribute string>,"msg_type":..,"msg_time":..}
 *   Interop produce --master H:P --topic T --count N
 *       send N messages; message i has body "java-<i>", attributes {"idx": i, "src": "java"},
 *       msgType "type<i % 3>" and msgTime 202611220630; print {"sent":N,"failed":F} at the end.
 *
 * Diagnostics go to stderr; exit code 0 only when every message was handled.
 */
package tubemqaio.benchpeer;

import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.Collections;
import java.util.List;

import org.apache.inlong.tubemq.client.config.ConsumerConfig;
import org.apache.inlong.tubemq.client.config.TubeClientConfig;
import org.apache.inlong.tubemq.client.consumer.ConsumePosition;
import org.apache.inlong.tubemq.client.consumer.ConsumerResult;
import org.apache.inlong.tubemq.client.consumer.PullMessageConsumer;
import org.apache.inlong.tubemq.client.factory.MessageSessionFactory;
import org.apache.inlong.tubemq.client.factory.TubeSingleSessionFactory;
import org.apache.inlong.tubemq.client.producer.MessageProducer;
import org.apache.inlong.tubemq.client.producer.MessageSentResult;
import org.apache.inlong.tubemq.corebase.Message;

public final class Interop {

    private Interop() {
    }

    private static String arg(String[] argv, String key, String dflt) {
        for (int i = 1; i + 1 < argv.length; i++) {
            if (argv[i].equals("--" + key)) {
                return argv[i + 1];
            }
        }
        if (dflt == null) {
            throw new IllegalArgumentException("missing --" + key);
        }
        return dflt;
    }

    private static String json(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    public static void main(String[] argv) throws Throwable {
        if (argv.length < 1) {
            System.err.println("usage: Interop dump|produce --master H:P --topic T ...");
            System.exit(2);
        }
        int rc;
        switch (argv[0]) {
            case "dump":
                rc = dump(argv);
                break;
            case "produce":
                rc = produce(argv);
                break;
            default:
                System.err.println("unknown command " + argv[0]);
                rc = 2;
        }
        System.out.flush();
        System.exit(rc);
    }

    private static int dump(String[] argv) throws Throwable {
        String master = arg(argv, "master", null);
        String topic = arg(argv, "topic", null);
        String group = arg(argv, "group", null);
        long count = Long.parseLong(arg(argv, "count", null));
        long idleNanos = (long) (Double.parseDouble(arg(argv, "idle-timeout-seconds", "60")) * 1e9);

        TubeClientConfig cfg = new TubeClientConfig(master);
        cfg.setHeartbeatPeriodMs(2000);
        MessageSessionFactory factory = new TubeSingleSessionFactory(cfg);
        ConsumerConfig cc = new ConsumerConfig(master, group);
        cc.setHeartbeatPeriodMs(2000);
        cc.setConsumePosition(ConsumePosition.CONSUMER_FROM_FIRST_OFFSET);
        cc.setMsgNotFoundWaitPeriodMs(50);
        PullMessageConsumer consumer = factory.createPullConsumer(cc);
        long seen = 0;
        try {
            consumer.subscribe(topic, null);
            consumer.completeSubscribe();
            long lastAt = System.nanoTime();
            StringBuilder out = new StringBuilder();
            while (seen < count && System.nanoTime() - lastAt < idleNanos) {
                ConsumerResult r = consumer.getMessage();
                if (!r.isSuccess()) {
                    Thread.sleep(20);
                    continue;
                }
                List<Message> msgs = r.getMessageList();
                if (msgs != null) {
                    for (Message m : msgs) {
                        out.setLength(0);
                        out.append("{\"body_b64\":")
                                .append(json(Base64.getEncoder().encodeToString(m.getData())))
                                .append(",\"attribute\":").append(json(m.getAttribute()))
                                .append(",\"msg_type\":").append(json(m.getMsgType()))
                                .append(",\"msg_time\":").append(json(m.getMsgTime()))
                                .append('}');
                        System.out.println(out);
                        seen++;
                    }
                    lastAt = System.nanoTime();
                }
                consumer.confirmConsume(r.getConfirmContext(), true);
            }
        } finally {
            consumer.shutdown();
            factory.shutdown();
        }
        System.err.println("dumped " + seen + " of " + count);
        return seen >= count ? 0 : 1;
    }

    private static int produce(String[] argv) throws Throwable {
        String master = arg(argv, "master", null);
        String topic = arg(argv, "topic", null);
        long count = Long.parseLong(arg(argv, "count", null));

        TubeClientConfig cfg = new TubeClientConfig(master);
        cfg.setHeartbeatPeriodMs(2000);
        MessageSessionFactory factory = new TubeSingleSessionFactory(cfg);
        MessageProducer producer = factory.createProducer();
        long failed = 0;
        String firstError = null;
        try {
            producer.publish(Collections.singleton(topic));
            long deadline = System.nanoTime() + 120_000_000_000L;
            while (!producer.isTopicCurAcceptPublish(topic)) {
                if (System.nanoTime() > deadline) {
                    System.err.println("topic never became publishable");
                    return 1;
                }
                Thread.sleep(200);
            }
            for (long i = 0; i < count; i++) {
                Message msg = new Message(topic, ("java-" + i).getBytes(StandardCharsets.UTF_8));
                msg.putSystemHeader("type" + (i % 3), "202611220630");
                msg.setAttrKeyVal("idx", Long.toString(i));
                msg.setAttrKeyVal("src", "java");
                MessageSentResult r = producer.sendMessage(msg);
                if (!r.isSuccess()) {
                    failed++;
                    if (firstError == null) {
                        firstError = r.getErrCode() + " " + r.getErrMsg();
                    }
                }
            }
        } finally {
            producer.shutdown();
            factory.shutdown();
        }
        System.out.println("{\"sent\":" + (count - failed) + ",\"failed\":" + failed
                + ",\"first_error\":" + json(firstError) + "}");
        return failed == 0 ? 0 : 1;
    }
}
