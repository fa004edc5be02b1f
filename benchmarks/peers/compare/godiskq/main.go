// Command godiskq runs one distinct-key workload of go-diskq and prints what it measured as one JSON
// line, for benchmarks/peers/compare/godiskq_peer.py (the Python peer that drives it):
//
//	godiskq WORKLOAD COUNT FOLDER
//
// WORKLOAD is single_keyed, read_keyed, latency_keyed-consume or latency_keyed-produce. Every
// message has a distinct 12-byte key ("ord-00000042") and a 100-byte value built in the timed loop,
// as the Python peers build theirs; opening and closing the queue or consumer are timed. The queue
// has one partition (the log every peer writes is one partition) and otherwise go-diskq's defaults.
//
// latency_keyed-consume opens a consumer, prints "ready" on its own line, and then takes COUNT
// messages whose values start with the CLOCK_MONOTONIC nanoseconds they were made at (little-endian);
// latency_keyed-produce pushes COUNT such messages, one every 500 µs on an absolute schedule.
package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	diskq "github.com/wcharczuk/go-diskq"
)

const (
	bodies          = 1000                   // distinct random value bodies, cycled (as common.VALUES)
	bodySize        = 88                     // random bytes of a value; its 12-digit number makes 100
	latencyInterval = 500 * time.Microsecond // 2,000 messages a second (common.KEYED_LATENCY_INTERVAL_S)
	stampSize       = 8
)

// Incompressible value bodies, made before anything is timed (the Python peers make theirs at import).
var valueBodies = func() [][]byte {
	random := rand.New(rand.NewSource(20_240_601))
	out := make([][]byte, bodies)
	for i := range out {
		out[i] = make([]byte, bodySize)
		random.Read(out[i])
	}
	return out
}()

type outcome struct {
	Seconds      float64 `json:"seconds"`
	LatenciesNs  []int64 `json:"latencies_ns"`
	RssPeakBytes int64   `json:"rss_peak_bytes"`
}

func main() {
	if len(os.Args) != 4 {
		fail(fmt.Errorf("usage: %s WORKLOAD COUNT FOLDER", filepath.Base(os.Args[0])))
	}
	workload, folder := os.Args[1], os.Args[3]
	count, err := strconv.Atoi(os.Args[2])
	if err != nil || count < 0 {
		fail(fmt.Errorf("COUNT must be a whole number ≥ 0, not %q", os.Args[2]))
	}
	path := filepath.Join(folder, "stream")
	var result outcome
	switch workload {
	case "single_keyed":
		result.Seconds, err = singleKeyed(path, count)
	case "read_keyed":
		result.Seconds, err = readKeyed(path, count)
	case "latency_keyed-consume":
		result.LatenciesNs, err = latencyConsume(path, count)
	case "latency_keyed-produce":
		err = latencyProduce(path, count)
	default:
		err = fmt.Errorf("unknown workload %q: choose single_keyed, read_keyed, latency_keyed-consume or latency_keyed-produce", workload)
	}
	if err != nil {
		fail(err)
	}
	result.RssPeakBytes = peakRSS()
	if err := json.NewEncoder(os.Stdout).Encode(result); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "godiskq:", err)
	os.Exit(1)
}

func open(path string) (*diskq.Diskq, error) {
	return diskq.New(path, diskq.Options{PartitionCount: 1})
}

// key is the number-th distinct key, as common.key: "ord-%08d".
func key(number int) string {
	buf := make([]byte, 0, 12)
	buf = append(buf, "ord-"...)
	digits := strconv.Itoa(number)
	for i := len(digits); i < 8; i++ {
		buf = append(buf, '0')
	}
	return string(append(buf, digits...))
}

// value is the number-th message's 100-byte value, as common.message_value: a body and 12 digits.
func value(number int) []byte {
	buf := make([]byte, 0, bodySize+12)
	buf = append(buf, valueBodies[number%bodies]...)
	digits := strconv.Itoa(number)
	for i := len(digits); i < 12; i++ {
		buf = append(buf, '0')
	}
	return append(buf, digits...)
}

func push(q *diskq.Diskq, first, count int) error {
	for number := first; number < first+count; number++ {
		if _, _, err := q.Push(diskq.Message{PartitionKey: key(number), Data: value(number)}); err != nil {
			return err
		}
	}
	return nil
}

// singleKeyed pushes count messages one at a time, opening and closing the queue in the timed span.
func singleKeyed(path string, count int) (float64, error) {
	started := time.Now()
	q, err := open(path)
	if err != nil {
		return 0, err
	}
	if err := push(q, 0, count); err != nil {
		return 0, err
	}
	if err := q.Close(); err != nil {
		return 0, err
	}
	return time.Since(started).Seconds(), nil
}

// readKeyed writes count messages (untimed), then times a consumer reading them all in order, one at
// a time from its channel, from opening it to closing it.
func readKeyed(path string, count int) (float64, error) {
	q, err := open(path)
	if err != nil {
		return 0, err
	}
	if err := push(q, 0, count); err != nil {
		return 0, err
	}
	if err := q.Close(); err != nil {
		return 0, err
	}
	started := time.Now()
	consumer, err := diskq.OpenConsumer(path, 0, diskq.ConsumerOptions{
		StartBehavior: diskq.ConsumerStartBehaviorOldest,
		EndBehavior:   diskq.ConsumerEndBehaviorClose,
	})
	if err != nil {
		return 0, err
	}
	seen := 0
	for range consumer.Messages() {
		seen++
	}
	if err := <-consumer.Errors(); err != nil {
		return 0, err
	}
	if err := consumer.Close(); err != nil {
		return 0, err
	}
	seconds := time.Since(started).Seconds()
	if seen != count {
		return 0, fmt.Errorf("read %d messages of the %d written", seen, count)
	}
	return seconds, nil
}

// monotonicNs is CLOCK_MONOTONIC, the clock the Python peers stamp with (common.now_ns), so that a
// latency crosses processes.
func monotonicNs() int64 {
	var now unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &now); err != nil {
		fail(err)
	}
	return now.Nano()
}

// latencyConsume creates the (empty) queue so that the consumer has a partition to watch, waits for
// new messages from the producer process and records each one's age when it arrives.
func latencyConsume(path string, count int) ([]int64, error) {
	q, err := open(path)
	if err != nil {
		return nil, err
	}
	if err := q.Close(); err != nil {
		return nil, err
	}
	consumer, err := diskq.OpenConsumer(path, 0, diskq.ConsumerOptions{
		StartBehavior: diskq.ConsumerStartBehaviorOldest,
		EndBehavior:   diskq.ConsumerEndBehaviorWait,
	})
	if err != nil {
		return nil, err
	}
	defer func() { _ = consumer.Close() }()
	fmt.Println("ready")
	latencies := make([]int64, 0, count)
	deadline := time.After(time.Duration(count)*latencyInterval + 60*time.Second)
	for len(latencies) < count {
		select {
		case message, ok := <-consumer.Messages():
			if !ok {
				return nil, fmt.Errorf("the consumer stopped after %d of %d messages", len(latencies), count)
			}
			if len(message.Data) < stampSize {
				return nil, fmt.Errorf("message %d has no time stamp", message.Offset)
			}
			latencies = append(latencies, monotonicNs()-int64(binary.LittleEndian.Uint64(message.Data)))
		case err := <-consumer.Errors():
			if err != nil {
				return nil, err
			}
		case <-deadline:
			return nil, fmt.Errorf("timed out after %d of %d messages", len(latencies), count)
		}
	}
	return latencies, nil
}

// latencyProduce pushes count stamped messages with distinct keys on an absolute schedule.
func latencyProduce(path string, count int) error {
	q, err := open(path)
	if err != nil {
		return err
	}
	started := time.Now()
	for i := 0; i < count; i++ {
		if delay := time.Until(started.Add(time.Duration(i) * latencyInterval)); delay > 0 {
			time.Sleep(delay)
		}
		data := value(i)
		binary.LittleEndian.PutUint64(data, uint64(monotonicNs()))
		if _, _, err := q.Push(diskq.Message{PartitionKey: key(i), Data: data}); err != nil {
			return err
		}
	}
	return q.Close()
}

// peakRSS is this process's VmHWM in bytes (0 where /proc does not say).
func peakRSS() int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	var kib int64
	for _, line := range splitLines(string(status)) {
		if _, err := fmt.Sscanf(line, "VmHWM: %d kB", &kib); err == nil {
			return kib * 1024
		}
	}
	return 0
}

func splitLines(text string) []string {
	var lines []string
	start := 0
	for i := 0; i < len(text); i++ {
		if text[i] == '\n' {
			lines = append(lines, text[start:i])
			start = i + 1
		}
	}
	return append(lines, text[start:])
}
