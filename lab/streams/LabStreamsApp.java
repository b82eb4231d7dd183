package groupscope.lab;

import java.io.FileWriter;
import java.io.IOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyDescription;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * One instance of the lab's Kafka Streams application, on the streams rebalance protocol (KIP-1071).
 *
 * Topology: words -> groupBy(value) -> count -> word-counts. The groupBy makes a repartition topic (a
 * second subtopology) and the count a changelogged store, so the group has stateful tasks that standby
 * replicas can hold. Usage: LabStreamsApp bootstrap applicationId name stateDir eventsFile [KIND:IN:OUT].
 * With the last argument the topology is one of:
 * - stateless:IN:OUT, IN -> mapValues(upper case) -> OUT: one stateless subtopology without a repartition
 *   topic, whose tasks follow IN's partitions when it grows;
 * - stateless-lower:IN:OUT, the same with lower case: changed processing, the same subtopologies and topics;
 * - counting:IN:OUT, IN -> groupBy(value) -> count -> OUT: the default's shape on other topics (two
 *   subtopologies, a repartition topic and a changelog).
 *
 * The instance writes its own view as JSON lines to eventsFile (the lab's member-*.jsonl ground truth):
 * its topology as it describes it (each subtopology's source topics) when it starts, every state
 * transition from the state listener, an uncaught error from the uncaught-exception handler (the client
 * is then shut down, as with no handler), and its active and standby tasks whenever they change (polled
 * from metadataForLocalThreads, which is what the instance itself believes it runs). SIGTERM closes it
 * with LEAVE_GROUP (a clean leave); SIGKILL is a crash.
 */
public final class LabStreamsApp {
    private static Writer events;
    private static String member;
    private static String group;

    private static synchronized void event(String name, String details) {
        String line = "{\"at_ms\":" + System.currentTimeMillis() + ",\"event\":\"" + name + "\",\"member\":\""
                + member + "\",\"group\":\"" + group + "\"" + details + "}\n";
        try {
            events.write(line);
            events.flush();
        } catch (IOException error) {
            throw new RuntimeException(error);
        }
    }

    private static String jsonList(TreeSet<String> values) {
        StringBuilder out = new StringBuilder("[");
        for (String value : values) {
            out.append(out.length() > 1 ? ",\"" : "\"").append(value).append('"');
        }
        return out.append(']').toString();
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        group = args[1];
        member = args[2];
        events = new FileWriter(args[4], StandardCharsets.UTF_8, true);

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, group);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        props.put(StreamsConfig.CLIENT_ID_CONFIG, member);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[3]);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 500);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);

        StreamsBuilder builder = new StreamsBuilder();
        // Internal topics are named after the application id, so every counting app can use the same names.
        String[] variant = args.length > 5 ? args[5].split(":") : new String[] {"counting", "words", "word-counts"};
        if (variant[0].equals("stateless") || variant[0].equals("stateless-lower")) {
            boolean lower = variant[0].equals("stateless-lower");
            builder.<String, String>stream(variant[1])
                    .mapValues(value -> lower ? value.toLowerCase() : value.toUpperCase())
                    .to(variant[2], Produced.with(Serdes.String(), Serdes.String()));
        } else if (variant[0].equals("counting")) {
            builder.<String, String>stream(variant[1])
                    .groupBy((key, value) -> value, Grouped.as("by-word"))
                    .count(Materialized.as("counts"))
                    .toStream()
                    .map((value, count) -> KeyValue.pair(value, Long.toString(count)))
                    .to(variant[2], Produced.with(Serdes.String(), Serdes.String()));
        } else {
            throw new IllegalArgumentException("unknown topology " + args[5]);
        }

        Topology topology = builder.build();
        KafkaStreams streams = new KafkaStreams(topology, props);
        streams.setStateListener((to, from) -> event("streams_state", ",\"from\":\"" + from + "\",\"to\":\"" + to + "\""));
        streams.setUncaughtExceptionHandler(error -> {
            StringBuilder causes = new StringBuilder("[");
            for (Throwable cause = error; cause != null; cause = cause.getCause()) {
                String message = String.valueOf(cause.getMessage()).replace("\\", "\\\\").replace("\"", "\\\"");
                causes.append(causes.length() > 1 ? "," : "").append("{\"class\":\"").append(cause.getClass().getName())
                        .append("\",\"message\":\"").append(message).append("\"}");
            }
            event("streams_uncaught_error", ",\"causes\":" + causes.append(']'));
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });

        ScheduledExecutorService poller = Executors.newSingleThreadScheduledExecutor();
        String[] last = {""};
        poller.scheduleAtFixedRate(() -> {
            TreeSet<String> active = new TreeSet<>();
            TreeSet<String> standby = new TreeSet<>();
            for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
                thread.activeTasks().forEach(task -> active.add(task.taskId().toString()));
                thread.standbyTasks().forEach(task -> standby.add(task.taskId().toString()));
            }
            String details = ",\"state\":\"" + streams.state() + "\",\"active\":" + jsonList(active)
                    + ",\"standby\":" + jsonList(standby);
            if (!details.equals(last[0])) {
                last[0] = details;
                event("streams_tasks", details);
            }
        }, 0, 100, TimeUnit.MILLISECONDS);

        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            poller.shutdownNow();
            event("streams_closing", ",\"operation\":\"LEAVE_GROUP\"");
            streams.close(CloseOptions.groupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP)
                    .withTimeout(Duration.ofSeconds(30)));
            event("streams_closed", "");
            closed.countDown();
        }));
        StringBuilder sources = new StringBuilder("{");
        for (TopologyDescription.Subtopology subtopology : topology.describe().subtopologies()) {
            TreeSet<String> topics = new TreeSet<>();
            for (TopologyDescription.Node node : subtopology.nodes()) {
                if (node instanceof TopologyDescription.Source source) {
                    topics.addAll(source.topicSet());
                }
            }
            sources.append(sources.length() > 1 ? "," : "").append('"').append(subtopology.id()).append("\":").append(jsonList(topics));
        }
        event("streams_starting", ",\"subtopologies\":" + topology.describe().subtopologies().size()
                + ",\"source_topics\":" + sources.append('}'));
        streams.start();
        closed.await();
    }
}
