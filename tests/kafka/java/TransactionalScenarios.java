import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java client's transactional producer and read_committed / read_uncommitted consumers in one
 * scenario, printing one line per observation for tests/kafka/test_differential_transactions_java.py
 * to compare between the gateway and Apache Kafka.
 *
 * <p>Arguments: BOOTSTRAP PREFIX SCENARIO. Every topic, group and transactional id starts with
 * PREFIX. Scenarios:
 *
 * <ul>
 *   <li>{@code commit-abort-open}: a committed, an aborted and an open transaction on one
 *       partition; what each isolation level reads and its end offset while the last is open, and
 *       after it commits.
 *   <li>{@code fencing}: a second producer of a transactional id fences the first, whose commit
 *       then throws; what each isolation level reads.
 *   <li>{@code consume-transform-produce}: a group member's records written upper-cased with the
 *       group's offsets in the transaction (sendOffsetsToTransaction), a committed round then an
 *       aborted one; the group's committed offset after each.
 *   <li>{@code timeout}: a transaction left open past transaction.timeout.ms (3 s) is aborted by the
 *       coordinator; the late commit's exception; a new producer of the id writes on.
 *   <li>{@code many-partitions}: one transaction over six and two partitions of two topics commits,
 *       the next aborts, a third writes one partition; every partition's reads and end offsets.
 * </ul>
 *
 * Any unexpected failure throws, and the JVM exits non-zero.
 */
public final class TransactionalScenarios {
  private static final long TIMEOUT_SECONDS = 60;
  private static final Duration POLL = Duration.ofMillis(100);

  private final String bootstrap;
  private final String prefix;
  private final Admin admin;

  private TransactionalScenarios(String bootstrap, String prefix) {
    this.bootstrap = bootstrap;
    this.prefix = prefix;
    Properties config = new Properties();
    config.put("bootstrap.servers", bootstrap);
    config.put("client.id", "adiskq-java-test");
    this.admin = Admin.create(config);
  }

  public static void main(String[] args) throws Exception {
    TransactionalScenarios scenarios = new TransactionalScenarios(args[0], args[1]);
    try {
      switch (args[2]) {
        case "commit-abort-open" -> scenarios.commitAbortOpen();
        case "fencing" -> scenarios.fencing();
        case "consume-transform-produce" -> scenarios.consumeTransformProduce();
        case "timeout" -> scenarios.timeout();
        case "many-partitions" -> scenarios.manyPartitions();
        default -> throw new IllegalArgumentException("no scenario " + args[2]);
      }
    } finally {
      scenarios.admin.close();
    }
  }

  private void commitAbortOpen() throws Exception {
    String topic = create("t", 1);
    List<TopicPartition> partitions = List.of(new TopicPartition(topic, 0));
    try (KafkaProducer<String, String> producer = producer(prefix + "-txn", 60_000)) {
      producer.beginTransaction();
      send(producer, "produced", topic, 0, "a0", "a1");
      producer.commitTransaction();
      producer.beginTransaction();
      send(producer, "produced", topic, 0, "b0");
      producer.abortTransaction();
      producer.beginTransaction();
      send(producer, "produced", topic, 0, "c0", "c1");
      readBoth("while-open", partitions);
      producer.commitTransaction();
      readBoth("after-commit", partitions);
    }
  }

  private void fencing() throws Exception {
    String topic = create("t", 1);
    try (KafkaProducer<String, String> zombie = producer(prefix + "-txn", 60_000)) {
      zombie.beginTransaction();
      send(zombie, "zombie-produced", topic, 0, "zombie");
      try (KafkaProducer<String, String> fresh = producer(prefix + "-txn", 60_000)) {
        fresh.beginTransaction();
        send(fresh, "fresh-produced", topic, 0, "fresh");
        fresh.commitTransaction();
      }
      System.out.println("zombie-commit " + outcome(zombie::commitTransaction));
    }
    readBoth("after", List.of(new TopicPartition(topic, 0)));
  }

  private void consumeTransformProduce() throws Exception {
    String source = create("in", 1);
    String sink = create("out", 1);
    String group = prefix + "-g";
    TopicPartition partition = new TopicPartition(source, 0);
    Properties plainConfig = common();
    plainConfig.put("linger.ms", "0");
    try (KafkaProducer<String, String> plain = new KafkaProducer<>(plainConfig);
        KafkaConsumer<String, String> member = consumer(group, IsolationLevel.READ_COMMITTED);
        KafkaProducer<String, String> producer = producer(prefix + "-txn", 60_000)) {
      member.subscribe(List.of(source));
      int round = 0;
      for (boolean commit : new boolean[] {true, false}) {
        round++;
        String[] inputs = round == 1 ? new String[] {"a", "b", "c"} : new String[] {"d", "e"};
        send(plain, "input", source, 0, inputs);
        List<String> got = new ArrayList<>();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(TIMEOUT_SECONDS);
        while (got.size() < inputs.length) {
          check(System.nanoTime() < deadline, "the group member read " + got + " only");
          for (ConsumerRecord<String, String> record : member.poll(POLL)) {
            got.add(record.value());
          }
        }
        producer.beginTransaction();
        send(producer, "output", sink, 0, got.stream().map(String::toUpperCase).toArray(String[]::new));
        producer.sendOffsetsToTransaction(
            Map.of(partition, new OffsetAndMetadata(member.position(partition))), member.groupMetadata());
        if (commit) {
          producer.commitTransaction();
        } else {
          producer.abortTransaction();
        }
        // A read_committed consumer asks for stable offsets (KIP-447): the answer waits for the
        // markers that commit or drop the transaction's offsets.
        OffsetAndMetadata committed = member.committed(java.util.Set.of(partition)).get(partition);
        System.out.println("round " + round + " read " + got + " committed " + (committed == null ? "none" : committed.offset()));
      }
    }
    readBoth("sink", List.of(new TopicPartition(sink, 0)));
  }

  private void timeout() throws Exception {
    String topic = create("t", 1);
    TopicPartition partition = new TopicPartition(topic, 0);
    try (KafkaProducer<String, String> producer = producer(prefix + "-txn", 3_000)) {
      producer.beginTransaction();
      send(producer, "produced", topic, 0, "h0", "h1");
      System.out.println("ends-while-open " + ends(List.of(partition)));
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(TIMEOUT_SECONDS);
      while (!ends(List.of(partition)).equals("[3] [3]")) { // the abort marker at 2
        check(System.nanoTime() < deadline, "the hung transaction was not aborted: " + ends(List.of(partition)));
      }
      System.out.println("late-commit " + outcome(producer::commitTransaction));
    }
    try (KafkaProducer<String, String> producer = producer(prefix + "-txn", 3_000)) {
      producer.beginTransaction();
      send(producer, "produced", topic, 0, "after");
      producer.commitTransaction();
    }
    readBoth("after", List.of(partition));
  }

  private void manyPartitions() throws Exception {
    String wide = create("wide", 6);
    String narrow = create("narrow", 2);
    List<TopicPartition> partitions = new ArrayList<>();
    for (int p = 0; p < 6; p++) {
      partitions.add(new TopicPartition(wide, p));
    }
    partitions.add(new TopicPartition(narrow, 0));
    partitions.add(new TopicPartition(narrow, 1));
    try (KafkaProducer<String, String> producer = producer(prefix + "-txn", 60_000)) {
      for (String round : new String[] {"one", "two"}) {
        producer.beginTransaction();
        for (TopicPartition tp : partitions) {
          send(producer, "produced", tp.topic(), tp.partition(), round + "-" + tp.partition());
        }
        if (round.equals("one")) {
          producer.commitTransaction();
        } else {
          producer.abortTransaction();
        }
      }
      producer.beginTransaction();
      send(producer, "produced", narrow, 1, "three");
      producer.commitTransaction();
    }
    readBoth("all", partitions);
  }

  // --- helpers -----------------------------------------------------------------------------

  private Properties common() {
    Properties config = new Properties();
    config.put("bootstrap.servers", bootstrap);
    config.put("client.id", "adiskq-java-test");
    config.put("key.serializer", StringSerializer.class.getName());
    config.put("value.serializer", StringSerializer.class.getName());
    config.put("key.deserializer", StringDeserializer.class.getName());
    config.put("value.deserializer", StringDeserializer.class.getName());
    return config;
  }

  private String create(String what, int partitions) throws Exception {
    String topic = prefix + "-" + what;
    admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get(TIMEOUT_SECONDS, TimeUnit.SECONDS);
    return topic;
  }

  private KafkaProducer<String, String> producer(String transactionalId, int timeoutMs) {
    Properties config = common();
    config.put("transactional.id", transactionalId);
    config.put("transaction.timeout.ms", Integer.toString(timeoutMs));
    config.put("delivery.timeout.ms", Integer.toString(Math.max(timeoutMs, 3_000)));
    config.put("request.timeout.ms", Integer.toString(Math.min(timeoutMs, 30_000)));
    config.put("linger.ms", "0");
    config.put("max.block.ms", Long.toString(TimeUnit.SECONDS.toMillis(TIMEOUT_SECONDS)));
    KafkaProducer<String, String> producer = new KafkaProducer<>(config);
    producer.initTransactions();
    return producer;
  }

  private KafkaConsumer<String, String> consumer(String group, IsolationLevel isolation) {
    Properties config = common();
    config.put("group.id", group);
    config.put("enable.auto.commit", "false");
    config.put("auto.offset.reset", "earliest");
    config.put("isolation.level", isolation.toString());
    return new KafkaConsumer<>(config);
  }

  /** Send each value to one partition and wait for its answer; print "LABEL OFFSET VALUE" each. */
  private static void send(KafkaProducer<String, String> producer, String label, String topic, int partition, String... values)
      throws Exception {
    for (String value : values) {
      long offset = producer.send(new ProducerRecord<>(topic, partition, "k", value)).get(TIMEOUT_SECONDS, TimeUnit.SECONDS).offset();
      System.out.println(label + " " + partition + " " + offset + " " + value);
    }
  }

  /** What each isolation level reads of the partitions from offset 0 up to its end offsets. */
  private void readBoth(String label, List<TopicPartition> partitions) {
    for (IsolationLevel isolation : new IsolationLevel[] {IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED}) {
      try (KafkaConsumer<String, String> reader = consumer(prefix + "-reader", isolation)) {
        reader.assign(partitions);
        reader.seekToBeginning(partitions);
        Map<TopicPartition, Long> ends = reader.endOffsets(partitions);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(TIMEOUT_SECONDS);
        List<String> seen = new ArrayList<>();
        while (!reachedEnds(reader, ends)) {
          check(System.nanoTime() < deadline, "no end of " + ends + " (" + isolation + "), read " + seen);
          for (ConsumerRecord<String, String> record : reader.poll(POLL)) {
            seen.add(record.topic().substring(prefix.length() + 1) + "/" + record.partition() + "@" + record.offset() + "=" + record.value());
          }
        }
        seen.sort(null);
        List<Long> endList = new ArrayList<>();
        for (TopicPartition tp : partitions) {
          endList.add(ends.get(tp));
        }
        System.out.println(label + " " + isolation + " read " + seen + " ends " + endList);
      }
    }
  }

  private static boolean reachedEnds(KafkaConsumer<String, String> reader, Map<TopicPartition, Long> ends) {
    for (Map.Entry<TopicPartition, Long> end : ends.entrySet()) {
      if (reader.position(end.getKey()) < end.getValue()) {
        return false;
      }
    }
    return true;
  }

  /** The AdminClient's latest offsets: "[read_committed ends] [read_uncommitted ends]". */
  private String ends(Collection<TopicPartition> partitions) throws Exception {
    List<String> both = new ArrayList<>();
    for (IsolationLevel isolation : new IsolationLevel[] {IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED}) {
      Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
      for (TopicPartition tp : partitions) {
        latest.put(tp, OffsetSpec.latest());
      }
      var answers = admin.listOffsets(latest, new ListOffsetsOptions(isolation)).all().get(TIMEOUT_SECONDS, TimeUnit.SECONDS);
      List<Long> offsets = new ArrayList<>();
      for (TopicPartition tp : partitions) {
        offsets.add(answers.get(tp).offset());
      }
      both.add(offsets.toString());
    }
    return String.join(" ", both);
  }

  /** "ok", or the exception (its cause's, when the client wraps one) class name. */
  private static String outcome(Runnable call) {
    try {
      call.run();
      return "ok";
    } catch (KafkaException error) {
      Throwable cause = error.getCause() instanceof KafkaException ? error.getCause() : error;
      return error.getClass().getSimpleName() + " caused-by " + cause.getClass().getSimpleName();
    }
  }

  private static void check(boolean condition, String what) {
    if (!condition) {
      throw new IllegalStateException(what);
    }
  }
}
