package groupscope;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Assignment;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupSubscription;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.ConsumerGroupPartitionAssignor;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;
import org.apache.kafka.coordinator.group.assignor.UniformAssignor;
import org.apache.kafka.coordinator.group.modern.GroupSpecImpl;
import org.apache.kafka.coordinator.group.modern.MemberSubscriptionAndAssignmentImpl;

/**
 * The what-if replay: one logical rebalance per input line (JSON), replayed through Kafka's own assignors,
 * one output line per (rebalance, assignor). Kafka's code decides; this class only translates.
 *
 * <p>Input: {"key": any, "group_protocol": "classic"|"consumer", "group_id": s, "topics": [{"topic": s,
 * "partition_count": n, "topic_id": s|null}], "members": [{"member_key": s, "member_id": s|null, "instance_id":
 * s|null, "rack_id": s|null, "topics": [s], "generation": n|null, "owned": [{"topic": s, "partition": n}]}]}.
 * The assignors see each member under its member id, as a Java leader's GroupSubscription and the KIP-848
 * coordinator key them (the sticky assignors break ties on it); the output names it by member_key. Classic groups go
 * through the consumer's range, roundrobin, sticky and cooperative-sticky exactly as a group leader calls them
 * (assign(Cluster, GroupSubscription)); consumer (KIP-848) groups through the coordinator's uniform and range.
 *
 * <p>Output: {"key", "assignor", "round_count", "assignment": [{"member_key", "topic", "partition"}],
 * "revoked": [...]}: eager assignors see no owned partitions (an eager member revokes all before it joins;
 * sticky's memory is its user data); cooperative-sticky is run twice, as a group does: the first round withholds
 * the partitions changing owner, their owners revoke them, and a second round (generation + 1) hands them out.
 * A rebalance an assignor throws on gives one line {"key", "error"} instead.
 */
public final class AssignorReplay {
  private static final int NO_GENERATION = -1;
  private static final ObjectMapper JSON = new ObjectMapper();

  private AssignorReplay() {}

  public static void main(String[] args) throws IOException {
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      if (line.isBlank()) continue;
      JsonNode rebalance = JSON.readTree(line);
      List<ObjectNode> results;
      try {
        results = replay(rebalance);
      } catch (RuntimeException refused) {
        // An assignor refusing one membership must not cost the night its other rebalances: said, not thrown.
        ObjectNode error = JSON.createObjectNode();
        error.set("key", rebalance.get("key"));
        error.put("error", String.valueOf(refused));
        results = List.of(error);
      }
      for (ObjectNode result : results) {
        out.write(JSON.writeValueAsString(result));
        out.newLine();
      }
    }
    out.flush();
  }

  static List<ObjectNode> replay(JsonNode rebalance) {
    Map<String, Integer> partitionCounts = new TreeMap<>();
    Map<String, String> topicIds = new HashMap<>();
    for (JsonNode topic : rebalance.get("topics")) {
      partitionCounts.put(topic.get("topic").asText(), topic.get("partition_count").asInt());
      if (!topic.path("topic_id").isNull() && !topic.path("topic_id").isMissingNode()) {
        topicIds.put(topic.get("topic").asText(), topic.get("topic_id").asText());
      }
    }
    List<ObjectNode> results = new ArrayList<>();
    if ("consumer".equals(rebalance.get("group_protocol").asText())) {
      for (ConsumerGroupPartitionAssignor assignor :
          List.of(new UniformAssignor(), new org.apache.kafka.coordinator.group.assignor.RangeAssignor())) {
        results.add(result(rebalance, assignor.name(), 1, serverAssign(assignor, rebalance, partitionCounts, topicIds), Map.of()));
      }
      return results;
    }
    Cluster cluster = cluster(partitionCounts);
    String groupId = rebalance.path("group_id").asText("");
    for (String name : List.of("range", "roundrobin", "sticky")) {
      Map<String, List<TopicPartition>> assigned = eagerAssign(name, groupId, rebalance.get("members"), cluster);
      results.add(result(rebalance, name, 1, assigned, Map.of()));
    }
    Map<String, List<TopicPartition>> owned = new TreeMap<>();
    Map<String, Integer> generations = new HashMap<>();
    for (JsonNode member : rebalance.get("members")) {
      owned.put(member.get("member_key").asText(), partitions(member.get("owned")));
      generations.put(member.get("member_key").asText(), member.path("generation").asInt(NO_GENERATION));
    }
    Map<String, List<TopicPartition>> first = cooperativeAssign(groupId, rebalance.get("members"), owned, generations, cluster);
    Map<String, List<TopicPartition>> revoked = new TreeMap<>();
    boolean anyRevoked = false;
    for (Map.Entry<String, List<TopicPartition>> entry : owned.entrySet()) {
      List<TopicPartition> lost = new ArrayList<>(entry.getValue());
      lost.removeAll(first.getOrDefault(entry.getKey(), List.of()));
      revoked.put(entry.getKey(), lost);
      anyRevoked |= !lost.isEmpty();
    }
    if (!anyRevoked) {
      results.add(result(rebalance, "cooperative-sticky", 1, first, revoked));
      return results;
    }
    Map<String, Integer> nextGenerations = new HashMap<>();
    int next = generations.values().stream().mapToInt(Integer::intValue).max().orElse(0) + 1;
    for (String member : generations.keySet()) nextGenerations.put(member, next);
    Map<String, List<TopicPartition>> second = cooperativeAssign(groupId, rebalance.get("members"), first, nextGenerations, cluster);
    results.add(result(rebalance, "cooperative-sticky", 2, second, revoked));
    return results;
  }

  private static Cluster cluster(Map<String, Integer> partitionCounts) {
    // No leaders and no replicas: we do not know the brokers' racks, so no assignor goes rack-aware.
    List<PartitionInfo> partitions = new ArrayList<>();
    partitionCounts.forEach((topic, count) -> {
      for (int partition = 0; partition < count; partition++) {
        partitions.add(new PartitionInfo(topic, partition, null, new Node[0], new Node[0]));
      }
    });
    return new Cluster("replay", List.of(), partitions, Set.of(), Set.of());
  }

  private static Map<String, List<TopicPartition>> eagerAssign(String name, String groupId, JsonNode members, Cluster cluster) {
    ConsumerPartitionAssignor leader = switch (name) {
      case "range" -> new RangeAssignor();
      case "roundrobin" -> new RoundRobinAssignor();
      default -> new StickyAssignor();
    };
    Map<String, Subscription> subscriptions = new HashMap<>();
    for (JsonNode member : members) {
      List<String> topics = strings(member.get("topics"));
      java.nio.ByteBuffer userData = null;
      if (leader instanceof StickyAssignor) {
        // Sticky's memory of what a member held travels in its own user data, written by its own code.
        StickyAssignor own = new StickyAssignor();
        int generation = member.path("generation").asInt(NO_GENERATION);
        if (generation != NO_GENERATION) {
          own.onAssignment(new Assignment(partitions(member.get("owned"))), metadata(groupId, generation, member));
        }
        userData = own.subscriptionUserData(new HashSet<>(topics));
      }
      subscriptions.put(memberId(member), subscription(topics, userData, List.of(), NO_GENERATION, member));
    }
    return byMemberKey(members, assignments(leader.assign(cluster, new GroupSubscription(subscriptions))));
  }

  private static Map<String, List<TopicPartition>> cooperativeAssign(
      String groupId, JsonNode members, Map<String, List<TopicPartition>> owned, Map<String, Integer> generations, Cluster cluster) {
    Map<String, Subscription> subscriptions = new HashMap<>();
    for (JsonNode member : members) {
      String key = member.get("member_key").asText();
      List<String> topics = strings(member.get("topics"));
      int generation = generations.get(key);
      CooperativeStickyAssignor own = new CooperativeStickyAssignor();
      if (generation != NO_GENERATION) {
        own.onAssignment(new Assignment(owned.get(key)), metadata(groupId, generation, member));
      }
      java.nio.ByteBuffer userData = own.subscriptionUserData(new HashSet<>(topics));
      subscriptions.put(memberId(member), subscription(topics, userData, owned.get(key), generation, member));
    }
    return byMemberKey(members, assignments(new CooperativeStickyAssignor().assign(cluster, new GroupSubscription(subscriptions))));
  }

  private static Subscription subscription(
      List<String> topics, java.nio.ByteBuffer userData, List<TopicPartition> owned, int generation, JsonNode member) {
    Subscription subscription = new Subscription(topics, userData, owned, generation, optional(member, "rack_id"));
    subscription.setGroupInstanceId(optional(member, "instance_id"));
    return subscription;
  }

  private static ConsumerGroupMetadata metadata(String groupId, int generation, JsonNode member) {
    return new ConsumerGroupMetadata(groupId, generation, memberId(member), optional(member, "instance_id"));
  }

  /** The name the assignors know a member by: its member id, or its key where no id was given. */
  private static String memberId(JsonNode member) {
    return optional(member, "member_id").orElseGet(() -> member.get("member_key").asText());
  }

  /** Assignments by member id -> by member_key (a key that two members share gets both their partitions). */
  private static Map<String, List<TopicPartition>> byMemberKey(JsonNode members, Map<String, List<TopicPartition>> byId) {
    Map<String, List<TopicPartition>> result = new TreeMap<>();
    for (JsonNode member : members) {
      List<TopicPartition> assigned = byId.get(memberId(member));
      if (assigned != null) result.computeIfAbsent(member.get("member_key").asText(), ignored -> new ArrayList<>()).addAll(assigned);
    }
    return result;
  }

  private static Map<String, List<TopicPartition>> assignments(ConsumerPartitionAssignor.GroupAssignment group) {
    Map<String, List<TopicPartition>> result = new TreeMap<>();
    group.groupAssignment().forEach((member, assignment) -> result.put(member, assignment.partitions()));
    return result;
  }

  private static Map<String, List<TopicPartition>> serverAssign(
      ConsumerGroupPartitionAssignor assignor, JsonNode rebalance, Map<String, Integer> partitionCounts, Map<String, String> topicIds) {
    Map<Uuid, String> names = new HashMap<>();
    Map<String, Uuid> ids = new HashMap<>();
    for (String topic : partitionCounts.keySet()) {
      Uuid id = topicIds.containsKey(topic) ? Uuid.fromString(topicIds.get(topic)) : nameUuid(topic);
      names.put(id, topic);
      ids.put(topic, id);
    }
    Map<String, MemberSubscriptionAndAssignmentImpl> members = new HashMap<>();
    Map<Uuid, Map<Integer, String>> owners = new HashMap<>();
    Set<Set<Uuid>> distinctSubscriptions = new HashSet<>();
    for (JsonNode member : rebalance.get("members")) {
      String id = memberId(member);
      Set<Uuid> subscribed = new TreeSet<>();
      for (String topic : strings(member.get("topics"))) if (ids.containsKey(topic)) subscribed.add(ids.get(topic));
      distinctSubscriptions.add(subscribed);
      Map<Uuid, Set<Integer>> held = new HashMap<>();
      for (TopicPartition partition : partitions(member.get("owned"))) {
        Uuid topicId = ids.get(partition.topic());
        if (topicId == null) continue;
        held.computeIfAbsent(topicId, ignored -> new HashSet<>()).add(partition.partition());
        owners.computeIfAbsent(topicId, ignored -> new HashMap<>()).put(partition.partition(), id);
      }
      members.put(id, new MemberSubscriptionAndAssignmentImpl(
          optional(member, "rack_id"), optional(member, "instance_id"), subscribed,
          new org.apache.kafka.coordinator.group.modern.Assignment(held)));
    }
    SubscriptionType type = distinctSubscriptions.size() <= 1 ? SubscriptionType.HOMOGENEOUS : SubscriptionType.HETEROGENEOUS;
    SubscribedTopicDescriber describer = new SubscribedTopicDescriber() {
      @Override public int numPartitions(Uuid topicId) {
        return names.containsKey(topicId) ? partitionCounts.get(names.get(topicId)) : -1;
      }
      @Override public Set<String> racksForPartition(Uuid topicId, int partition) {
        return Set.of();
      }
    };
    GroupAssignment group = assignor.assign(new GroupSpecImpl(members, type, owners), describer);
    Map<String, List<TopicPartition>> result = new TreeMap<>();
    for (Map.Entry<String, MemberAssignment> entry : group.members().entrySet()) {
      List<TopicPartition> partitions = new ArrayList<>();
      entry.getValue().partitions().forEach((id, numbers) -> numbers.forEach(n -> partitions.add(new TopicPartition(names.get(id), n))));
      result.put(entry.getKey(), partitions);
    }
    return byMemberKey(rebalance.get("members"), result);
  }

  /** A stable stand-in id for a topic whose id the records did not give (classic groups never do). */
  private static Uuid nameUuid(String topic) {
    try {
      byte[] digest = MessageDigest.getInstance("SHA-256").digest(topic.getBytes(StandardCharsets.UTF_8));
      long high = 0, low = 0;
      for (int i = 0; i < 8; i++) {
        high = (high << 8) | (digest[i] & 0xff);
        low = (low << 8) | (digest[i + 8] & 0xff);
      }
      return new Uuid(high, low);
    } catch (NoSuchAlgorithmException impossible) {
      throw new IllegalStateException(impossible);
    }
  }

  private static ObjectNode result(
      JsonNode rebalance, String assignor, int rounds, Map<String, List<TopicPartition>> assigned, Map<String, List<TopicPartition>> revoked) {
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
    new TreeMap<>(byMember).forEach((member, partitions) -> {
      List<TopicPartition> sorted = new ArrayList<>(partitions);
      sorted.sort((a, b) -> a.topic().equals(b.topic()) ? Integer.compare(a.partition(), b.partition()) : a.topic().compareTo(b.topic()));
      for (TopicPartition partition : sorted) {
        rows.addObject().put("member_key", member).put("topic", partition.topic()).put("partition", partition.partition());
      }
    });
    return rows;
  }

  private static List<TopicPartition> partitions(JsonNode owned) {
    List<TopicPartition> partitions = new ArrayList<>();
    if (owned != null) for (JsonNode row : owned) partitions.add(new TopicPartition(row.get("topic").asText(), row.get("partition").asInt()));
    return partitions;
  }

  private static List<String> strings(JsonNode array) {
    List<String> values = new ArrayList<>();
    if (array != null) for (JsonNode value : array) values.add(value.asText());
    return values;
  }

  private static Optional<String> optional(JsonNode member, String field) {
    JsonNode value = member.get(field);
    return value == null || value.isNull() ? Optional.empty() : Optional.of(value.asText());
  }
}
