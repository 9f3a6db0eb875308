/*
 * The producer side of a benchmark run with the official Java client: session factory and
 * producer, publishing one topic, waited for until the topic accepts messages. Written for this
 * project; shared by the closed-loop produce (Peer.java) and the open-loop latency (Latency.java).
 */
package tubemqaio.benchpeer;

import java.util.Collections;

import org.apache.inlong.tubemq.client.config.TubeClientConfig;
import org.apache.inlong.tubemq.client.factory.MessageSessionFactory;
import org.apache.inlong.tubemq.client.factory.TubeSingleSessionFactory;
import org.apache.inlong.tubemq.client.producer.MessageProducer;

final class ProducerSession implements AutoCloseable {
    final MessageSessionFactory factory;
    final MessageProducer producer;
    /** Seconds until the topic accepted messages; negative when it never did (readyTimeout). */
    final double readySeconds;

    ProducerSession(String master, String topic, long rpcTimeoutMs, long heartbeatMs,
                    double readyTimeout) throws Exception {
        TubeClientConfig cfg = new TubeClientConfig(master);
        cfg.setRpcTimeoutMs(rpcTimeoutMs);
        cfg.setHeartbeatPeriodMs(heartbeatMs);
        factory = new TubeSingleSessionFactory(cfg);
        producer = factory.createProducer();
        producer.publish(Collections.singleton(topic));
        long readyStart = System.nanoTime();
        long deadline = readyStart + (long) (readyTimeout * 1e9);
        double ready = -1;
        while (ready < 0) {
            if (producer.isTopicCurAcceptPublish(topic)) {
                ready = (System.nanoTime() - readyStart) / 1e9;
            } else if (System.nanoTime() > deadline) {
                Peer.log("topic " + topic + " never became publishable");
                break;
            } else {
                Thread.sleep(100);
            }
        }
        readySeconds = ready;
    }

    @Override
    public void close() {
        try {
            producer.shutdown();
            factory.shutdown();
        } catch (Throwable t) {
            Peer.log("shutdown: " + t);
        }
    }
}
