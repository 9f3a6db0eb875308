/*
 * Log-bucketed latency histogram in microseconds, the same buckets as the Python harness's
 * (benchmarks/harness/latency.py): 64 sub-buckets per power of two, ~1.1 % relative width.
 * Written for this project. Thread-safe: the open-loop sender records from client callback threads.
 */
package tubemqaio.benchpeer;

import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

final class Histogram {
    private static final int SUB = 64;

    private final TreeMap<Integer, Long> counts = new TreeMap<>();
    private long total;
    private double maxUs;

    synchronized void record(double us) {
        int b = us < 1 ? 0 : (int) (Math.log(us) / Math.log(2) * SUB);
        counts.merge(b, 1L, Long::sum);
        total++;
        maxUs = Math.max(maxUs, us);
    }

    synchronized long total() {
        return total;
    }

    private Double percentile(double p) {
        if (total == 0) {
            return null;
        }
        long rank = (long) Math.ceil(p / 100 * total);
        long seen = 0;
        for (Map.Entry<Integer, Long> e : counts.entrySet()) {
            seen += e.getValue();
            if (seen >= rank) {
                return Math.min(Math.pow(2, (e.getKey() + 1) / (double) SUB), maxUs);
            }
        }
        return maxUs;
    }

    /** {"count":N,"p50_ms":..,"p90_ms":..,"p99_ms":..,"p999_ms":..,"max_ms":..} */
    synchronized String summaryJson() {
        StringBuilder b = new StringBuilder("{\"count\":").append(total);
        String[] names = {"p50", "p90", "p99", "p999"};
        double[] ps = {50.0, 90.0, 99.0, 99.9};
        for (int i = 0; i < names.length; i++) {
            Double v = percentile(ps[i]);
            b.append(",\"").append(names[i]).append("_ms\":")
                    .append(v == null ? "null" : String.format(Locale.ROOT, "%.3f", v / 1000));
        }
        b.append(String.format(Locale.ROOT, ",\"max_ms\":%.3f}", maxUs / 1000));
        return b.toString();
    }

    /** [[latency ms, cumulative fraction], ...] per non-empty bucket. */
    synchronized String cdfJson() {
        StringBuilder b = new StringBuilder("[");
        long seen = 0;
        for (Map.Entry<Integer, Long> e : counts.entrySet()) {
            seen += e.getValue();
            if (b.length() > 1) {
                b.append(',');
            }
            b.append(String.format(Locale.ROOT, "[%.4f,%.6f]",
                    Math.pow(2, (e.getKey() + 1) / (double) SUB) / 1000, seen / (double) total));
        }
        return b.append(']').toString();
    }
}
