package groupscope.lab;

import java.io.FileWriter;
import java.io.IOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * One member of a lab share group (KIP-932), Kafka's own KafkaShareConsumer with explicit acknowledgement.
 * Usage: LabShareConsumer bootstrap group name topic[,topic...] eventsFile.
 *
 * What to do with a record is written in its value by the driver, so the ground truth is known before
 * any member sees it: "accept", "reject", "release-once" (RELEASE on the first delivery, ACCEPT on the
 * next) and "release-always" (RELEASE on every delivery, until the broker archives it at the group's
 * delivery count limit). Anything else is accepted.
 *
 * Events (JSON lines, the lab's member-*.jsonl ground truth): every record the consumer received with
 * the delivery count the broker gave it, every acknowledgement (topic, partition, offset, type), every
 * acknowledgement commit the callback reported, and the assignment the broker holds for this member
 * (DescribeShareGroups from an admin client in this process, matched by client id: the share consumer
 * has no assignment() of its own), written whenever it changes. SIGTERM closes the consumer (pending
 * acknowledgements committed, then a leave heartbeat); SIGKILL is a crash.
 */
public final class LabShareConsumer {
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

    private static String quoted(String value) {
        return "\"" + value.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    private static String jsonList(Set<String> values) {
        StringBuilder out = new StringBuilder("[");
        for (String value : values) {
            out.append(out.length() > 1 ? "," : "").append(quoted(value));
        }
        return out.append(']').toString();
    }

    private static AcknowledgeType decide(String plan, int deliveryCount) {
        switch (plan) {
            case "reject":
                return AcknowledgeType.REJECT;
            case "release-always":
                return AcknowledgeType.RELEASE;
            case "release-once":
                return deliveryCount == 1 ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT;
            default:
                return AcknowledgeType.ACCEPT;
        }
    }

    /** This member's entry in the broker's description of the group, written when anything in it changes. */
    private static void watchAssignment(Admin admin, String[] last) {
        try {
            ShareGroupDescription description =
                    admin.describeShareGroups(List.of(group)).describedGroups().get(group).get(10, TimeUnit.SECONDS);
            TreeSet<String> members = new TreeSet<>();
            ShareMemberDescription self = null;
            for (ShareMemberDescription candidate : description.members()) {
                members.add(candidate.clientId());
                if (candidate.clientId().equals(member)) {
                    self = candidate;
                }
            }
            if (self == null) {
                return; // not joined yet (or already fenced): nothing this member holds
            }
            TreeSet<String> assignment = new TreeSet<>();
            self.assignment().topicPartitions().forEach(tp -> assignment.add(tp.topic() + "-" + tp.partition()));
            String details = ",\"member_id\":" + quoted(self.consumerId()) + ",\"member_epoch\":" + self.memberEpoch()
                    + ",\"group_epoch\":" + description.groupEpoch() + ",\"assignment_epoch\":"
                    + description.targetAssignmentEpoch() + ",\"state\":" + quoted(description.groupState().toString())
                    + ",\"assignment\":" + jsonList(assignment) + ",\"group_members\":" + jsonList(members);
            if (!details.equals(last[0])) {
                last[0] = details;
                event("share_assignment", details);
            }
        } catch (Exception error) { // e.g. the coordinator loading: ask again on the next tick
            event("share_describe_failed", ",\"error\":" + quoted(String.valueOf(error)));
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        group = args[1];
        member = args[2];
        List<String> topics = Arrays.asList(args[3].split(","));
        events = new FileWriter(args[4], StandardCharsets.UTF_8, true);

        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, member);
        props.put("share.acknowledgement.mode", "explicit");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(props);
        consumer.setAcknowledgementCommitCallback((Map<TopicIdPartition, Set<Long>> offsets, Exception error) ->
                offsets.forEach((tp, acknowledged) -> event("share_ack_committed", ",\"topic\":" + quoted(tp.topic())
                        + ",\"partition\":" + tp.partition() + ",\"offsets\":" + new TreeSet<>(acknowledged)
                        + ",\"error\":" + (error == null ? "null" : quoted(error.toString())))));

        Properties adminProps = new Properties();
        adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        adminProps.put(AdminClientConfig.CLIENT_ID_CONFIG, member + "-watch");
        Admin admin = Admin.create(adminProps);
        ScheduledExecutorService watcher = Executors.newSingleThreadScheduledExecutor();
        String[] last = {""};
        watcher.scheduleWithFixedDelay(() -> watchAssignment(admin, last), 0, 300, TimeUnit.MILLISECONDS);

        AtomicBoolean running = new AtomicBoolean(true);
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            running.set(false);
            consumer.wakeup();
            try {
                closed.await(60, TimeUnit.SECONDS);
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
        }));

        consumer.subscribe(topics);
        event("share_started", ",\"topics\":" + jsonList(new TreeSet<>(topics)));
        try {
            while (running.get()) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
                for (ConsumerRecord<String, String> record : records) {
                    int deliveries = record.deliveryCount().map(Short::intValue).orElse(-1);
                    AcknowledgeType type = decide(record.value(), deliveries);
                    String where = ",\"topic\":" + quoted(record.topic()) + ",\"partition\":" + record.partition()
                            + ",\"offset\":" + record.offset();
                    event("share_record", where + ",\"delivery_count\":" + deliveries + ",\"plan\":"
                            + quoted(record.value()));
                    consumer.acknowledge(record, type);
                    event("share_ack", where + ",\"type\":\"" + type + "\"");
                }
                if (!records.isEmpty()) {
                    consumer.commitSync(); // the callback reports each partition's outcome
                }
            }
        } catch (WakeupException stopping) {
            // SIGTERM: fall through to close
        } finally {
            watcher.shutdownNow();
            admin.close(Duration.ofSeconds(5));
            event("share_closing", "");
            consumer.close(Duration.ofSeconds(30)); // commits what is pending, then leaves the group
            event("share_closed", "");
            closed.countDown();
        }
    }
}
