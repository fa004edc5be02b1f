import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java AdminClient's calls for the admin APIs a one-broker Kafka serves, against BOOTSTRAP
 * (usage: AdminCalls BOOTSTRAP TOPIC GROUP): a topic created with a config, five records written,
 * DeleteRecords before offset 3, IncrementalAlterConfigs of retention.bytes, a group's offsets
 * stored, one partition's deleted (OffsetDelete), the group deleted (DeleteGroups) and deleted
 * again. Each answer is printed a line at a time, so that the gateway's and Kafka's can be compared;
 * any unexpected failure throws and the JVM exits non-zero.
 */
public final class AdminCalls {
  private static final long TIMEOUT_SECONDS = 60;

  private AdminCalls() {}

  public static void main(String[] args) throws Exception {
    String bootstrap = args[0];
    String topic = args[1];
    String group = args[2];
    Properties common = new Properties();
    common.put("bootstrap.servers", bootstrap);
    TopicPartition first = new TopicPartition(topic, 0);
    TopicPartition second = new TopicPartition(topic, 1);
    try (Admin admin = Admin.create(common)) {
      admin
          .createTopics(List.of(new NewTopic(topic, 2, (short) 1).configs(Map.of("retention.ms", "60000"))))
          .all()
          .get(TIMEOUT_SECONDS, TimeUnit.SECONDS);
      System.out.println("created");
      write(common, topic);
      long low =
          admin
              .deleteRecords(Map.of(first, RecordsToDelete.beforeOffset(3)))
              .lowWatermarks()
              .get(first)
              .get(TIMEOUT_SECONDS, TimeUnit.SECONDS)
              .lowWatermark();
      System.out.println("low watermark " + low);

      ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
      AlterConfigOp set =
          new AlterConfigOp(new ConfigEntry("retention.bytes", "1000000"), AlterConfigOp.OpType.SET);
      admin
          .incrementalAlterConfigs(Map.of(resource, List.of(set)))
          .all()
          .get(TIMEOUT_SECONDS, TimeUnit.SECONDS);
      System.out.println("retention.bytes " + described(admin, resource, "retention.bytes", "1000000"));
      System.out.println("retention.ms " + described(admin, resource, "retention.ms", "60000"));

      admin
          .alterConsumerGroupOffsets(
              group, Map.of(first, new OffsetAndMetadata(4), second, new OffsetAndMetadata(0)))
          .all()
          .get(TIMEOUT_SECONDS, TimeUnit.SECONDS);
      admin.deleteConsumerGroupOffsets(group, Set.of(first)).all().get(TIMEOUT_SECONDS, TimeUnit.SECONDS);
      Map<TopicPartition, OffsetAndMetadata> left =
          admin
              .listConsumerGroupOffsets(group)
              .partitionsToOffsetAndMetadata()
              .get(TIMEOUT_SECONDS, TimeUnit.SECONDS);
      System.out.println("offsets left " + left.keySet() + " " + left.get(second).offset());

      admin.deleteConsumerGroups(List.of(group)).all().get(TIMEOUT_SECONDS, TimeUnit.SECONDS);
      System.out.println("group deleted");
      try {
        admin.deleteConsumerGroups(List.of(group)).all().get(TIMEOUT_SECONDS, TimeUnit.SECONDS);
        System.out.println("deleted twice");
      } catch (ExecutionException error) {
        System.out.println("again " + error.getCause().getClass().getSimpleName());
      }
    }
  }

  private static void write(Properties common, String topic) throws Exception {
    Properties settings = new Properties();
    settings.putAll(common);
    settings.put("key.serializer", StringSerializer.class.getName());
    settings.put("value.serializer", StringSerializer.class.getName());
    try (KafkaProducer<String, String> producer = new KafkaProducer<>(settings)) {
      for (int i = 0; i < 5; i++) {
        producer.send(new ProducerRecord<>(topic, 0, null, "value-" + i)).get(TIMEOUT_SECONDS, TimeUnit.SECONDS);
      }
    }
  }

  /** The config's value once it is WANTED (a Kafka broker learns of an alter a moment after it). */
  private static String described(Admin admin, ConfigResource resource, String name, String wanted)
      throws Exception {
    long deadline = System.nanoTime() + Duration.ofSeconds(TIMEOUT_SECONDS).toNanos();
    while (true) {
      String value =
          admin
              .describeConfigs(List.of(resource))
              .all()
              .get(TIMEOUT_SECONDS, TimeUnit.SECONDS)
              .get(resource)
              .get(name)
              .value();
      if (value.equals(wanted) || System.nanoTime() > deadline) {
        return value;
      }
    }
  }
}
