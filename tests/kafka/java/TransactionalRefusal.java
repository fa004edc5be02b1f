import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A transactional producer of the Java client against a broker that does not serve transactions,
 * for tests/kafka/test_transactional_refusal.py.
 *
 * <p>Arguments: BOOTSTRAP. A producer with a transactional id calls initTransactions (max.block.ms
 * 60 s) and prints one line: "refused SECONDS EXCEPTION_CLASS MESSAGE" when it throws, or
 * "initialized" when it does not.
 */
public final class TransactionalRefusal {
  private TransactionalRefusal() {}

  public static void main(String[] args) {
    Properties config = new Properties();
    config.put("bootstrap.servers", args[0]);
    config.put("client.id", "adiskq-java-test");
    config.put("transactional.id", "refused-java");
    config.put("max.block.ms", "60000");
    config.put("key.serializer", StringSerializer.class.getName());
    config.put("value.serializer", StringSerializer.class.getName());
    try (KafkaProducer<String, String> producer = new KafkaProducer<>(config)) {
      long started = System.nanoTime();
      try {
        producer.initTransactions();
        System.out.println("initialized");
      } catch (KafkaException error) {
        double seconds = (System.nanoTime() - started) / 1e9;
        System.out.printf("refused %.1f %s %s%n", seconds, error.getClass().getSimpleName(), error.getMessage());
      }
    }
  }
}
