import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java Kafka client in normal use against one broker, printing one line per result for the
 * test that runs it (tests/kafka/test_java_client.py) to check.
 *
 * <p>Arguments: BOOTSTRAP TOPIC GROUP COMPRESSION COUNT. The AdminClient creates TOPIC (2
 * partitions) and a scratch topic, lists them, describes TOPIC's configs and partitions, deletes
 * the scratch topic and lists again; a producer with the client's defaults (acks=all, idempotent)
 * writes COUNT keyed records with a header, record i stamped at 1,700,000,000,000 ms plus (i *
 * 7919) % COUNT (out of order); the AdminClient lists each partition's offsets by every spec it
 * has; a consumer of GROUP subscribes, polls until it has them all, commits them with commitSync
 * and reads its committed offsets back, then leaves; the AdminClient lists and describes the group
 * and lists its offsets. Any failure throws, and the JVM exits non-zero.
 */
public final class KafkaJavaClient {
  private static final long TIMEOUT_SECONDS = 60;
  private static final long FIRST_TIMESTAMP = 1_700_000_000_000L;

  private KafkaJavaClient() {}

  public static void main(String[] args) throws Exception {
    String bootstrap = args[0];
    String topic = args[1];
    String group = args[2];
    String compression = args[3];
    int count = Integer.parseInt(args[4]);
    Properties common = new Properties();
    common.put("bootstrap.servers", bootstrap);
    common.put("client.id", "adiskq-java-test");
    administer(common, topic);
    produce(common, topic, compression, count);
    listOffsets(common, topic);
    consume(common, topic, group, count);
    describeGroup(common, group);
  }

  private static void administer(Properties common, String topic) throws Exception {
    String scratch = topic + "-scratch";
    try (Admin admin = Admin.create(common)) {
      admin
          .createTopics(
              List.of(
                  new NewTopic(topic, 2, (short) 1),
                  new NewTopic(scratch, Optional.empty(), Optional.empty())))
          .all()
          .get(TIMEOUT_SECONDS, TimeUnit.SECONDS);
      Set<String> names = admin.listTopics().names().get(TIMEOUT_SECONDS, TimeUnit.SECONDS);
      System.out.println("listed " + names.contains(topic) + " " + names.contains(scratch));
      ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
      Config config =
          admin
              .describeConfigs(List.of(resource))
              .all()
              .get(TIMEOUT_SECONDS, TimeUnit.SECONDS)
              .get(resource);
      System.out.println("config cleanup.policy " + config.get("cleanup.policy").value());
      TopicDescription description =
          admin
              .describeTopics(List.of(topic))
              .allTopicNames()
              .get(TIMEOUT_SECONDS, TimeUnit.SECONDS)
              .get(topic);
      System.out.println("partitions " + description.partitions().size());
      admin.deleteTopics(List.of(scratch)).all().get(TIMEOUT_SECONDS, TimeUnit.SECONDS);
      names = admin.listTopics().names().get(TIMEOUT_SECONDS, TimeUnit.SECONDS);
      System.out.println("after delete " + names.contains(topic) + " " + names.contains(scratch));
    }
  }

  private static void produce(Properties common, String topic, String compression, int count)
      throws Exception {
    Properties settings = new Properties();
    settings.putAll(common);
    // acks=all and enable.idempotence=true are the client's defaults: left unset on purpose.
    settings.put("compression.type", compression);
    settings.put("linger.ms", "5");
    settings.put("key.serializer", StringSerializer.class.getName());
    settings.put("value.serializer", StringSerializer.class.getName());
    try (KafkaProducer<String, String> producer = new KafkaProducer<>(settings)) {
      List<Future<RecordMetadata>> sent = new ArrayList<>();
      for (int i = 0; i < count; i++) {
        List<Header> headers =
            List.of(new RecordHeader("n", Integer.toString(i).getBytes(StandardCharsets.UTF_8)));
        long timestamp = FIRST_TIMESTAMP + (i * 7919L) % count;
        sent.add(
            producer.send(
                new ProducerRecord<>(topic, null, timestamp, "key-" + i, "value-" + i, headers)));
      }
      producer.flush();
      for (Future<RecordMetadata> future : sent) {
        RecordMetadata metadata = future.get(TIMEOUT_SECONDS, TimeUnit.SECONDS);
        System.out.println(
            "produced "
                + metadata.partition()
                + " "
                + metadata.offset()
                + " "
                + metadata.timestamp());
      }
    }
  }

  private static void listOffsets(Properties common, String topic) throws Exception {
    Map<String, OffsetSpec> specs = new LinkedHashMap<>();
    specs.put("earliest", OffsetSpec.earliest());
    specs.put("latest", OffsetSpec.latest());
    specs.put("max-timestamp", OffsetSpec.maxTimestamp());
    specs.put("earliest-local", OffsetSpec.earliestLocal());
    specs.put("latest-tiered", OffsetSpec.latestTiered());
    specs.put("for-timestamp", OffsetSpec.forTimestamp(FIRST_TIMESTAMP + 10));
    try (Admin admin = Admin.create(common)) {
      for (int partition = 0; partition < 2; partition++) {
        TopicPartition tp = new TopicPartition(topic, partition);
        for (Map.Entry<String, OffsetSpec> spec : specs.entrySet()) {
          ListOffsetsResultInfo info =
              admin
                  .listOffsets(Map.of(tp, spec.getValue()))
                  .partitionResult(tp)
                  .get(TIMEOUT_SECONDS, TimeUnit.SECONDS);
          System.out.println(
              "offsets "
                  + partition
                  + " "
                  + spec.getKey()
                  + " "
                  + info.offset()
                  + " "
                  + info.timestamp());
        }
      }
    }
  }

  private static void describeGroup(Properties common, String group) throws Exception {
    try (Admin admin = Admin.create(common)) {
      boolean listed =
          admin.listConsumerGroups().all().get(TIMEOUT_SECONDS, TimeUnit.SECONDS).stream()
              .anyMatch(listing -> listing.groupId().equals(group));
      ConsumerGroupDescription description =
          admin
              .describeConsumerGroups(List.of(group))
              .all()
              .get(TIMEOUT_SECONDS, TimeUnit.SECONDS)
              .get(group);
      System.out.println("group " + listed + " " + description.members().size());
      Map<TopicPartition, OffsetAndMetadata> offsets =
          admin
              .listConsumerGroupOffsets(group)
              .partitionsToOffsetAndMetadata()
              .get(TIMEOUT_SECONDS, TimeUnit.SECONDS);
      for (Map.Entry<TopicPartition, OffsetAndMetadata> entry : offsets.entrySet()) {
        System.out.println(
            "group-offset " + entry.getKey().partition() + " " + entry.getValue().offset());
      }
    }
  }

  private static void consume(Properties common, String topic, String group, int count) {
    Properties settings = new Properties();
    settings.putAll(common);
    settings.put("group.id", group);
    settings.put("auto.offset.reset", "earliest");
    settings.put("enable.auto.commit", "false");
    settings.put("key.deserializer", StringDeserializer.class.getName());
    settings.put("value.deserializer", StringDeserializer.class.getName());
    try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(settings)) {
      consumer.subscribe(List.of(topic));
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(TIMEOUT_SECONDS);
      int seen = 0;
      while (seen < count) {
        if (System.nanoTime() > deadline) {
          throw new IllegalStateException("consumed " + seen + " of " + count + " records");
        }
        for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(500))) {
          Header header = record.headers().lastHeader("n");
          String n = header == null ? "-" : new String(header.value(), StandardCharsets.UTF_8);
          System.out.println(
              "consumed "
                  + record.partition()
                  + " "
                  + record.offset()
                  + " "
                  + record.key()
                  + " "
                  + record.value()
                  + " "
                  + n);
          seen++;
        }
      }
      consumer.commitSync(Duration.ofSeconds(TIMEOUT_SECONDS));
      Map<TopicPartition, OffsetAndMetadata> committed =
          consumer.committed(consumer.assignment(), Duration.ofSeconds(TIMEOUT_SECONDS));
      for (Map.Entry<TopicPartition, OffsetAndMetadata> entry : committed.entrySet()) {
        OffsetAndMetadata offset = entry.getValue();
        System.out.println(
            "committed " + entry.getKey().partition() + " " + (offset == null ? -1 : offset.offset()));
      }
    }
  }
}
