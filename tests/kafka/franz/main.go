// franzclient drives franz-go (github.com/twmb/franz-go), a Kafka client written from Kafka's
// protocol in Go, through one scenario against a broker, and prints what the client observed as one
// JSON document. The gateway's differential tests run it against the gateway and against Apache
// Kafka and compare the two documents.
//
// Usage: franzclient BOOTSTRAP TOPIC GROUP
//
// The scenario: produce six records to partition 0 (keys, a null key, a null value, an empty value,
// headers with a repeated name, producer-given timestamps) with an idempotent producer; read them
// back from offset 0; ask ListOffsets for the start, the end and the first offset at or after a
// time; consume them in a group and commit as its member (with the records' leader epoch), then,
// the group left empty, commit with metadata from outside it; read each commit back.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type record struct {
	Offset    int64       `json:"offset"`
	Key       *string     `json:"key"`
	Value     *string     `json:"value"`
	Headers   [][2]string `json:"headers"`
	Timestamp int64       `json:"timestamp"`
}

type observed struct {
	Produced       []int64  `json:"produced"`
	Read           []record `json:"read"`
	Start          int64    `json:"start"`
	End            int64    `json:"end"`
	AfterMilli     int64    `json:"after_milli"`
	GroupRead      int      `json:"group_read"`
	Committed      int64    `json:"committed"`
	CommitEpoch    int32    `json:"commit_leader_epoch"`
	AdminCommitted int64    `json:"admin_committed"`
	CommitMeta     string   `json:"admin_commit_metadata"`
}

func text(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: franzclient BOOTSTRAP TOPIC GROUP")
		os.Exit(2)
	}
	bootstrap, topic, group := os.Args[1], os.Args[2], os.Args[3]
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const base = int64(1_700_000_000_000)

	producer, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.AllowAutoTopicCreation())
	if err != nil {
		fail("producer", err)
	}
	records := []*kgo.Record{
		{Key: []byte("k0"), Value: []byte("v0")},
		{Key: nil, Value: []byte("no key")},
		{Key: []byte("k2"), Value: nil},
		{Key: []byte(""), Value: []byte("")},
		{Key: []byte("k4"), Value: []byte("v4"), Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("")}}},
		{Key: []byte("k5"), Value: []byte("v5")},
	}
	var observation observed
	for i, r := range records {
		r.Topic, r.Partition, r.Timestamp = topic, 0, time.UnixMilli(base+int64(1000*i))
		produced, err := producer.ProduceSync(ctx, r).First()
		if err != nil {
			fail("produce", err)
		}
		observation.Produced = append(observation.Produced, produced.Offset)
	}
	producer.Close()

	reader, err := kgo.NewClient(kgo.SeedBrokers(bootstrap),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}))
	if err != nil {
		fail("reader", err)
	}
	for len(observation.Read) < len(records) {
		fetches := reader.PollFetches(ctx)
		if errs := fetches.Errors(); len(errs) > 0 {
			fail("fetch", errs[0].Err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			headers := [][2]string{}
			for _, h := range r.Headers {
				headers = append(headers, [2]string{h.Key, string(h.Value)})
			}
			observation.Read = append(observation.Read, record{r.Offset, text(r.Key), text(r.Value), headers, r.Timestamp.UnixMilli()})
		})
	}
	reader.Close()

	adminClient, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		fail("admin", err)
	}
	admin := kadm.NewClient(adminClient)
	starts, err := admin.ListStartOffsets(ctx, topic)
	if err != nil {
		fail("list start offsets", err)
	}
	ends, err := admin.ListEndOffsets(ctx, topic)
	if err != nil {
		fail("list end offsets", err)
	}
	after, err := admin.ListOffsetsAfterMilli(ctx, base+2500, topic)
	if err != nil {
		fail("list offsets after a time", err)
	}
	start, _ := starts.Lookup(topic, 0)
	end, _ := ends.Lookup(topic, 0)
	at, _ := after.Lookup(topic, 0)
	observation.Start, observation.End, observation.AfterMilli = start.Offset, end.Offset, at.Offset

	member, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		fail("group member", err)
	}
	var last *kgo.Record
	for observation.GroupRead < len(records) {
		fetches := member.PollFetches(ctx)
		if errs := fetches.Errors(); len(errs) > 0 {
			fail("group fetch", errs[0].Err)
		}
		fetches.EachRecord(func(r *kgo.Record) { observation.GroupRead++; last = r })
	}
	if err := member.CommitRecords(ctx, last); err != nil {
		fail("member commit", err)
	}
	member.Close() // leaves the group, which is then Empty: a client outside it may commit
	fetched, err := admin.FetchOffsets(ctx, group)
	if err != nil {
		fail("fetch offsets", err)
	}
	committed, _ := fetched.Lookup(topic, 0)
	observation.Committed, observation.CommitEpoch = committed.At, committed.LeaderEpoch
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: topic, Partition: 0, At: 3, LeaderEpoch: -1, Metadata: "franz-go was here"})
	if err := admin.CommitAllOffsets(ctx, group, offsets); err != nil {
		fail("admin commit", err)
	}
	fetched, err = admin.FetchOffsets(ctx, group)
	if err != nil {
		fail("fetch offsets again", err)
	}
	again, _ := fetched.Lookup(topic, 0)
	observation.AdminCommitted, observation.CommitMeta = again.At, again.Metadata
	adminClient.Close()

	out, _ := json.Marshal(observation)
	fmt.Println(string(out))
}
