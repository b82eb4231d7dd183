package oracles;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Supplier;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Assignment;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupSubscription;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.clients.consumer.internals.ConsumerProtocol;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.ConsumerGroupPartitionAssignor;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;
import org.apache.kafka.coordinator.group.assignor.UniformAssignor;
import org.apache.kafka.coordinator.group.modern.GroupSpecImpl;
import org.apache.kafka.coordinator.group.modern.MemberSubscriptionAndAssignmentImpl;

/**
 * The test's oracle for the what-if replay: one rebalance per input line, played the way Kafka's own
 * members and leader play it, written apart from jvm/assignors so the two can disagree.
 *
 * <p>Classic: every member keeps its own assignor instance, told what it held by onAssignment (as
 * ConsumerCoordinator does after each SyncGroup); its subscription goes through ConsumerProtocol's bytes;
 * the leader's instance assigns a GroupSubscription keyed by member id. Eager members join owning nothing
 * (onJoinPrepare revoked it all); cooperative members own what they kept, and a round that withholds
 * partitions is followed by a second one. KIP-848: the coordinator's assignor over members keyed by
 * member id, each with the target it had.
 *
 * <p>Input: {"key", "group_protocol", "group_id", "leader": member id, "previous_generation": n, "topics":
 * [{"topic", "partition_count", "topic_id"}], "members": [{"member_id", "instance_id", "rack_id", "topics",
 * "owned": [{"topic", "partition"}] or null for a member new to the group}]}. Output per assignor: {"key",
 * "assignor", "round_count", "assignment": [{"member_id", "topic", "partition"}], "revoked": [...]}.
 */
public final class GroupLeaders {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Map<String, Supplier<ConsumerPartitionAssignor>> CLASSIC = new TreeMap<>(Map.of(
      "range", RangeAssignor::new,
      "roundrobin", RoundRobinAssignor::new,
      "sticky", StickyAssignor::new,
      "cooperative-sticky", CooperativeStickyAssignor::new));

  private GroupLeaders() {}

  public static void main(String[] args) throws Exception {
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
    String line;
    while ((line = in.readLine()) != null) {
      if (line.isBlank()) continue;
      JsonNode rebalance = JSON.readTree(line);
      if ("consumer".equals(rebalance.get("group_protocol").asText())) {
        out.println(JSON.writeValueAsString(coordinator(rebalance, "uniform", new UniformAssignor())));
        out.println(JSON.writeValueAsString(coordinator(
            rebalance, "range", new org.apache.kafka.coordinator.group.assignor.RangeAssignor())));
      } else {
        for (String name : CLASSIC.keySet()) out.println(JSON.writeValueAsString(leader(rebalance, name)));
      }
    }
    out.flush();
  }

  private static ObjectNode leader(JsonNode rebalance, String name) {
    String groupId = rebalance.get("group_id").asText();
    int previousGeneration = rebalance.get("previous_generation").asInt();
    boolean cooperative = name.equals("cooperative-sticky");
    Map<String, ConsumerPartitionAssignor> ownAssignors = new TreeMap<>();
    Map<String, List<TopicPartition>> held = new TreeMap<>();
    for (JsonNode member : rebalance.get("members")) {
      String id = member.get("member_id").asText();
      ConsumerPartitionAssignor own = CLASSIC.get(name).get();
      ownAssignors.put(id, own);
      JsonNode owned = member.get("owned");
      if (owned != null && !owned.isNull()) {
        List<TopicPartition> partitions = partitions(owned);
        own.onAssignment(new Assignment(partitions), metadata(groupId, previousGeneration, member));
        held.put(id, partitions);
      }
    }
    Map<String, List<TopicPartition>> kept = cooperative ? held : Map.of();
    Map<String, List<TopicPartition>> first = joinAndSync(rebalance, ownAssignors, kept, previousGeneration);
    Map<String, List<TopicPartition>> revoked = new TreeMap<>();
    boolean anyRevoked = false;
    if (cooperative) {
      for (Map.Entry<String, List<TopicPartition>> entry : held.entrySet()) {
        List<TopicPartition> lost = new ArrayList<>(entry.getValue());
        lost.removeAll(first.getOrDefault(entry.getKey(), List.of()));
        revoked.put(entry.getKey(), lost);
        anyRevoked |= !lost.isEmpty();
      }
    }
    if (!anyRevoked) return result(rebalance, name, 1, first, revoked);
    int generation = previousGeneration + 1;
    for (JsonNode member : rebalance.get("members")) {
      String id = member.get("member_id").asText();
      ownAssignors.get(id).onAssignment(new Assignment(first.getOrDefault(id, List.of())), metadata(groupId, generation, member));
    }
    return result(rebalance, name, 2, joinAndSync(rebalance, ownAssignors, first, generation), revoked);
  }

  /** One JoinGroup round: each member's subscription as bytes, the leader's assignment back per member id. */
  private static Map<String, List<TopicPartition>> joinAndSync(
      JsonNode rebalance, Map<String, ConsumerPartitionAssignor> ownAssignors, Map<String, List<TopicPartition>> owned,
      int generation) {
    Map<String, Subscription> subscriptions = new HashMap<>();
    for (JsonNode member : rebalance.get("members")) {
      String id = member.get("member_id").asText();
      List<String> topics = strings(member.get("topics"));
      ByteBuffer userData = ownAssignors.get(id).subscriptionUserData(new HashSet<>(topics));
      List<TopicPartition> ownedNow = owned.getOrDefault(id, List.of());
      int memberGeneration = owned.containsKey(id) ? generation : -1;
      Subscription sent = new Subscription(topics, userData, ownedNow, memberGeneration, optional(member, "rack_id"));
      Subscription received = ConsumerProtocol.deserializeSubscription(ConsumerProtocol.serializeSubscription(sent));
      received.setGroupInstanceId(optional(member, "instance_id"));
      subscriptions.put(id, received);
    }
    ConsumerPartitionAssignor leader = ownAssignors.get(rebalance.get("leader").asText());
    Map<String, List<TopicPartition>> result = new TreeMap<>();
    leader.assign(cluster(rebalance), new GroupSubscription(subscriptions)).groupAssignment().forEach((id, assignment) ->
        result.put(id, ConsumerProtocol.deserializeAssignment(ConsumerProtocol.serializeAssignment(assignment)).partitions()));
    return result;
  }

  private static ObjectNode coordinator(JsonNode rebalance, String name, ConsumerGroupPartitionAssignor assignor) {
    Map<Uuid, String> names = new HashMap<>();
    Map<String, Uuid> ids = new HashMap<>();
    Map<String, Integer> counts = new HashMap<>();
    for (JsonNode topic : rebalance.get("topics")) {
      Uuid id = Uuid.fromString(topic.get("topic_id").asText());
      names.put(id, topic.get("topic").asText());
      ids.put(topic.get("topic").asText(), id);
      counts.put(topic.get("topic").asText(), topic.get("partition_count").asInt());
    }
    Map<String, MemberSubscriptionAndAssignmentImpl> members = new HashMap<>();
    Map<Uuid, Map<Integer, String>> owners = new HashMap<>();
    Set<Set<Uuid>> subscriptions = new HashSet<>();
    for (JsonNode member : rebalance.get("members")) {
      String id = member.get("member_id").asText();
      Set<Uuid> subscribed = new HashSet<>();
      for (String topic : strings(member.get("topics"))) subscribed.add(ids.get(topic));
      subscriptions.add(subscribed);
      Map<Uuid, Set<Integer>> target = new HashMap<>();
      JsonNode owned = member.get("owned");
      if (owned != null && !owned.isNull()) {
        for (TopicPartition partition : partitions(owned)) {
          Uuid topicId = ids.get(partition.topic());
          target.computeIfAbsent(topicId, ignored -> new HashSet<>()).add(partition.partition());
          owners.computeIfAbsent(topicId, ignored -> new HashMap<>()).put(partition.partition(), id);
        }
      }
      members.put(id, new MemberSubscriptionAndAssignmentImpl(
          optional(member, "rack_id"), optional(member, "instance_id"), subscribed,
          new org.apache.kafka.coordinator.group.modern.Assignment(target)));
    }
    SubscriptionType type = subscriptions.size() <= 1 ? SubscriptionType.HOMOGENEOUS : SubscriptionType.HETEROGENEOUS;
    SubscribedTopicDescriber topics = new SubscribedTopicDescriber() {
      @Override public int numPartitions(Uuid topicId) {
        return names.containsKey(topicId) ? counts.get(names.get(topicId)) : -1;
      }
      @Override public Set<String> racksForPartition(Uuid topicId, int partition) {
        return Set.of();
      }
    };
    GroupAssignment assigned = assignor.assign(new GroupSpecImpl(members, type, owners), topics);
    Map<String, List<TopicPartition>> result = new TreeMap<>();
    assigned.members().forEach((id, assignment) -> {
      List<TopicPartition> partitions = new ArrayList<>();
      assignment.partitions().forEach((topicId, numbers) -> numbers.forEach(n -> partitions.add(new TopicPartition(names.get(topicId), n))));
      result.put(id, partitions);
    });
    return result(rebalance, name, 1, result, Map.of());
  }

  private static Cluster cluster(JsonNode rebalance) {
    List<PartitionInfo> partitions = new ArrayList<>();
    for (JsonNode topic : rebalance.get("topics")) {
      for (int partition = 0; partition < topic.get("partition_count").asInt(); partition++) {
        partitions.add(new PartitionInfo(topic.get("topic").asText(), partition, null, new Node[0], new Node[0]));
      }
    }
    return new Cluster("oracle", List.of(), partitions, Set.of(), Set.of());
  }

  private static ConsumerGroupMetadata metadata(String groupId, int generation, JsonNode member) {
    return new ConsumerGroupMetadata(groupId, generation, member.get("member_id").asText(), optional(member, "instance_id"));
  }

  private static ObjectNode result(
      JsonNode rebalance, String assignor, int rounds, Map<String, List<TopicPartition>> assigned,
      Map<String, List<TopicPartition>> revoked) {
    ObjectNode result = JSON.createObjectNode();
    result.set("key", rebalance.get("key"));
    result.put("assignor", assignor);
    result.put("round_count", rounds);
    result.set("assignment", rows(assigned));
    result.set("revoked", rows(revoked));
    return result;
  }

  private static ArrayNode rows(Map<String, List<TopicPartition>> byMember) {
    ArrayNode rows = JSON.createArrayNode();
    byMember.forEach((member, partitions) -> partitions.forEach(partition ->
        rows.addObject().put("member_id", member).put("topic", partition.topic()).put("partition", partition.partition())));
    return rows;
  }

  private static List<TopicPartition> partitions(JsonNode owned) {
    List<TopicPartition> partitions = new ArrayList<>();
    for (JsonNode row : owned) partitions.add(new TopicPartition(row.get("topic").asText(), row.get("partition").asInt()));
    return partitions;
  }

  private static List<String> strings(JsonNode array) {
    List<String> values = new ArrayList<>();
    if (array != null && !array.isNull()) for (JsonNode value : array) values.add(value.asText());
    return values;
  }

  private static Optional<String> optional(JsonNode member, String field) {
    JsonNode value = member.get(field);
    return value == null || value.isNull() ? Optional.empty() : Optional.of(value.asText());
  }
}
