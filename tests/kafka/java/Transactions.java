import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java client's transactions against a broker, for tests/kafka/test_transactions.py.
 *
 * <p>Arguments: BOOTSTRAP TOPIC GROUP. A transactional producer commits "c0".."c2" with the
 * group's offset 3 of TOPIC-0 in the same transaction (sendOffsetsToTransaction), then aborts
 * "a0".."a1" (flushed first, so the broker stores them); a second producer with the same
 * transactional id fences the first, whose next send fails. Then a read_committed and a
 * read_uncommitted consumer read TOPIC-0 to its end. Prints one line each:
 * "committed VALUES", "uncommitted VALUES" (comma-separated), "offset GROUP_OFFSET",
 * "fenced EXCEPTION_CLASS".
 */
public final class Transactions {
  private Transactions() {}

  private static KafkaProducer<String, String> producer(String bootstrap, String transactionalId) {
    Properties config = new Properties();
    config.put("bootstrap.servers", bootstrap);
    config.put("transactional.id", transactionalId);
    config.put("max.block.ms", "60000");
    config.put("key.serializer", StringSerializer.class.getName());
    config.put("value.serializer", StringSerializer.class.getName());
    return new KafkaProducer<>(config);
  }

  private static List<String> read(String bootstrap, String topic, String isolation) {
    Properties config = new Properties();
    config.put("bootstrap.servers", bootstrap);
    config.put("isolation.level", isolation);
    config.put("enable.auto.commit", "false");
    config.put("key.deserializer", StringDeserializer.class.getName());
    config.put("value.deserializer", StringDeserializer.class.getName());
    List<String> values = new ArrayList<>();
    TopicPartition partition = new TopicPartition(topic, 0);
    try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(config)) {
      consumer.assign(List.of(partition));
      consumer.seekToBeginning(List.of(partition));
      long end = consumer.endOffsets(List.of(partition)).get(partition);
      long deadline = System.nanoTime() + 60_000_000_000L;
      while (consumer.position(partition) < end && System.nanoTime() < deadline) {
        for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
          values.add(record.value());
        }
      }
    }
    return values;
  }

  public static void main(String[] args) throws Exception {
    String bootstrap = args[0];
    String topic = args[1];
    String group = args[2];
    String transactionalId = "java-" + topic;
    try (KafkaProducer<String, String> first = producer(bootstrap, transactionalId)) {
      first.initTransactions();
      first.beginTransaction();
      for (int i = 0; i < 3; i++) {
        first.send(new ProducerRecord<>(topic, 0, null, "c" + i));
      }
      Map<TopicPartition, OffsetAndMetadata> offsets = Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(3));
      first.sendOffsetsToTransaction(offsets, new org.apache.kafka.clients.consumer.ConsumerGroupMetadata(group));
      first.commitTransaction();
      first.beginTransaction();
      for (int i = 0; i < 2; i++) {
        first.send(new ProducerRecord<>(topic, 0, null, "a" + i));
      }
      first.flush();
      first.abortTransaction();
      first.beginTransaction();
      first.send(new ProducerRecord<>(topic, 0, null, "zombie")).get();
      try (KafkaProducer<String, String> second = producer(bootstrap, transactionalId)) {
        second.initTransactions();
        try {
          first.commitTransaction();
          System.out.println("fenced none");
        } catch (KafkaException error) {
          System.out.println("fenced " + error.getClass().getSimpleName());
        }
      }
    }
    System.out.println("committed " + String.join(",", read(bootstrap, topic, "read_committed")));
    System.out.println("uncommitted " + String.join(",", read(bootstrap, topic, "read_uncommitted")));
    Properties config = new Properties();
    config.put("bootstrap.servers", bootstrap);
    config.put("group.id", group);
    config.put("key.deserializer", StringDeserializer.class.getName());
    config.put("value.deserializer", StringDeserializer.class.getName());
    try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(config)) {
      TopicPartition partition = new TopicPartition(topic, 0);
      OffsetAndMetadata committed = consumer.committed(java.util.Set.of(partition)).get(partition);
      System.out.println("offset " + (committed == null ? -1 : committed.offset()));
    }
  }
}
