// Command sarama runs the client-library scenario (see ../scenario.py) with Sarama, the Go
// Kafka client, as Debian packages it (golang-github-shopify-sarama-dev 1.22.1).
//
// Sarama speaks the newest protocol version it knows (sarama.MaxVersion, Kafka 2.2.0). The
// admin steps use its ClusterAdmin, produce uses an idempotent AsyncProducer (acks=all, LZ4
// batches), the group steps its consumer group API. Messages follow scenario.py's model
// (key_of, value_of, headers_of) and every check compares what was read with what was
// acknowledged. Each step appends one TSV row (client, step, result, seconds, detail) to
// --results; its detail ends with the requests (API and version) Sarama sent during the step,
// seen by a passive tap on Sarama's connections (Net.Proxy.Dialer) that reads each request's
// header as it goes out and changes no byte.
//
// scenario_sarama.py builds it in GOPATH mode (GO111MODULE=off, GOPATH=/usr/share/gocode) and
// runs it.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/Shopify/sarama"
)

const (
	client = "sarama"
	// The message model and bounds of scenario.py.
	partitions  = 6
	messages    = 10000
	newMessages = 100
	keys        = 1000
	retentionMs = "86400000"
	stepTimeout = 120 * time.Second
	quiet       = 2 * time.Second

	requestTimeout = 30 * time.Second
	maxDetail      = 400
)

var steps = []string{
	"create-topic", "list-topics", "describe-configs", "produce",
	"group-consume", "committed-offsets", "latest-group", "delete-topic",
}

func keyOf(i int) string   { return fmt.Sprintf("key-%d", i%keys) }
func valueOf(i int) string { return fmt.Sprintf("%s|%d", client, i) }

func headersOf(i int) []header {
	return []header{{"seq", []byte(strconv.Itoa(i))}, {"client", []byte(client)}}
}

// ---- records and checks (scenario.py's, in Go) ------------------------------------------------

type header struct {
	key   string
	value []byte
}

// record is a message as a consumer saw it.
type record struct {
	partition int32
	offset    int64
	key       []byte
	value     []byte
	headers   []header
}

func toRecord(m *sarama.ConsumerMessage) record {
	r := record{partition: m.Partition, offset: m.Offset, key: m.Key, value: m.Value}
	for _, h := range m.Headers {
		r.headers = append(r.headers, header{string(h.Key), h.Value})
	}
	return r
}

// seq is the index this message claims to be (its seq header).
func (r record) seq() (int, error) {
	for _, h := range r.headers {
		if h.key == "seq" && h.value != nil {
			return strconv.Atoi(string(h.value))
		}
	}
	return 0, fmt.Errorf("no seq header in partition %d offset %d", r.partition, r.offset)
}

// checkRecord checks key, value and headers against the model and returns the message index.
func checkRecord(r record) (int, error) {
	i, err := r.seq()
	if err != nil {
		return 0, err
	}
	if want := keyOf(i); r.key == nil || string(r.key) != want {
		return i, fmt.Errorf("message %d: key %s, expected %q", i, quote(r.key), want)
	}
	if want := valueOf(i); r.value == nil || string(r.value) != want {
		return i, fmt.Errorf("message %d: value %s, expected %q", i, quote(r.value), want)
	}
	want := headersOf(i)
	same := len(r.headers) == len(want)
	for j := 0; same && j < len(want); j++ {
		same = r.headers[j].key == want[j].key && r.headers[j].value != nil &&
			string(r.headers[j].value) == string(want[j].value)
	}
	if !same {
		return i, fmt.Errorf("message %d: headers %s, expected %s", i, fmtHeaders(r.headers), fmtHeaders(want))
	}
	return i, nil
}

type ack struct {
	partition int32
	offset    int64
}

// produced is what the produce step learned, for the steps after it.
type produced struct {
	endOffsets  map[int32]int64 // partition -> end offset after the 10,000 messages
	partitionOf map[int]int32   // message index -> partition it was acknowledged on
}

// checkAcks checks delivery reports: every message acknowledged once, all partitions used,
// each key on one partition, offsets 0..n-1 per partition.
func checkAcks(acks map[int]ack, from, to int) (*produced, error) {
	var missing []int
	for i := from; i < to; i++ {
		if _, ok := acks[i]; !ok {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%d of %d not acknowledged (first %s)", len(missing), to-from, list(first(missing, 5)))
	}
	byPartition := map[int32][]int64{}
	keyPartitions := map[string]map[int32]bool{}
	for i := from; i < to; i++ {
		a := acks[i]
		byPartition[a.partition] = append(byPartition[a.partition], a.offset)
		if keyPartitions[keyOf(i)] == nil {
			keyPartitions[keyOf(i)] = map[int32]bool{}
		}
		keyPartitions[keyOf(i)][a.partition] = true
	}
	if len(byPartition) != partitions {
		return nil, fmt.Errorf("messages landed on %d partitions %s, expected %d",
			len(byPartition), list(sortedKeys(byPartition)), partitions)
	}
	if k, n := splitKeys(keyPartitions); n > 0 {
		return nil, fmt.Errorf("%d keys on more than one partition, e.g. %s on %s",
			n, k, list(sortedKeys(keyPartitions[k])))
	}
	p := &produced{endOffsets: map[int32]int64{}, partitionOf: map[int]int32{}}
	for part, offs := range byPartition {
		sort.Slice(offs, func(a, b int) bool { return offs[a] < offs[b] })
		for j, o := range offs {
			if o != int64(j) {
				return nil, fmt.Errorf("partition %d: offsets not 0..%d (duplicates or gaps), first %s",
					part, len(offs)-1, list(first(offs, 5)))
			}
		}
		p.endOffsets[part] = int64(len(offs))
	}
	for i := from; i < to; i++ {
		p.partitionOf[i] = acks[i].partition
	}
	return p, nil
}

// checkGroupRead checks a group's read: every expected message seen with the right key, value,
// headers and partition; both members held partitions, disjoint and covering the topic.
func checkGroupRead(byMember map[string][]record, assignments map[string][]int32, prod *produced, from, to int) (string, error) {
	members := sortedKeys(byMember)
	if len(members) != 2 {
		return "", fmt.Errorf("expected 2 members, got %s", list(members))
	}
	union := map[int32]bool{}
	for _, m := range members {
		if len(assignments[m]) == 0 {
			return "", fmt.Errorf("member %s never held a partition (assignments %v)", m, assignments)
		}
		for _, p := range assignments[m] {
			if union[p] {
				return "", fmt.Errorf("members share partitions: %s and %s",
					list(assignments[members[0]]), list(assignments[members[1]]))
			}
			union[p] = true
		}
	}
	if len(union) != partitions || !allPartitions(union) {
		return "", fmt.Errorf("assignments %s + %s do not cover the topic",
			list(assignments[members[0]]), list(assignments[members[1]]))
	}
	seen := map[int]int{}
	keyPartitions := map[string]map[int32]bool{}
	for _, m := range members {
		for _, r := range byMember[m] {
			i, err := checkRecord(r)
			if err != nil {
				return "", err
			}
			if i < from || i >= to {
				return "", fmt.Errorf("member %s read message %d, outside %d..%d", m, i, from, to-1)
			}
			if prod != nil && len(prod.partitionOf) > 0 {
				if want := prod.partitionOf[i]; r.partition != want {
					return "", fmt.Errorf("message %d read from partition %d, acked on %d", i, r.partition, want)
				}
			}
			if keyPartitions[string(r.key)] == nil {
				keyPartitions[string(r.key)] = map[int32]bool{}
			}
			keyPartitions[string(r.key)][r.partition] = true
			seen[i]++
		}
	}
	var missing []int
	for i := from; i < to; i++ {
		if seen[i] == 0 {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("%d of %d never read (first %s)", len(missing), to-from, list(first(missing, 5)))
	}
	if _, n := splitKeys(keyPartitions); n > 0 {
		return "", fmt.Errorf("%d keys read from more than one partition", n)
	}
	dups := 0
	for _, n := range seen {
		dups += n - 1
	}
	var counts []string
	for _, m := range members {
		counts = append(counts, fmt.Sprintf("%s: %d msgs, partitions %s", m, len(byMember[m]), list(assignments[m])))
	}
	return fmt.Sprintf("all %d read with keys and headers intact (%s; %d re-deliveries)",
		to-from, strings.Join(counts, ", "), dups), nil
}

func checkCommitted(committed map[int32]int64, prod *produced) (string, error) {
	same := len(committed) == len(prod.endOffsets)
	var sum int64
	for p, end := range prod.endOffsets {
		c, ok := committed[p]
		same = same && ok && c == end
		sum += end
	}
	if !same {
		return "", fmt.Errorf("committed %s, end offsets %s", fmtOffsets(committed), fmtOffsets(prod.endOffsets))
	}
	return fmt.Sprintf("committed offsets = end offsets on all %d partitions (sum %d)", len(prod.endOffsets), sum), nil
}

func checkLatest(records []record) (string, error) {
	var seqs, old []int
	for _, r := range records {
		i, err := checkRecord(r)
		if err != nil {
			return "", err
		}
		seqs = append(seqs, i)
		if i < messages {
			old = append(old, i)
		}
	}
	sort.Ints(old)
	if len(old) > 0 {
		return "", fmt.Errorf("read %d messages produced before it joined, e.g. %s", len(old), list(first(old, 5)))
	}
	sort.Ints(seqs)
	distinct := map[int]bool{}
	exact := len(seqs) == newMessages
	for j, i := range seqs {
		distinct[i] = true
		exact = exact && i == messages+j
	}
	if !exact {
		return "", fmt.Errorf("read %d messages (%d distinct), expected exactly the %d new ones",
			len(seqs), len(distinct), newMessages)
	}
	return fmt.Sprintf("exactly the %d new messages, none of the %d old", newMessages, messages), nil
}

// ---- the scenario: steps, rows, waits ---------------------------------------------------------

// scenario runs steps, times them, and appends one TSV row per step.
type scenario struct {
	out    string
	tap    *tap
	failed map[string]bool
	done   map[string]bool
}

func (s *scenario) row(step, result string, seconds float64, detail string) {
	detail = strings.Join(strings.Fields(detail), " ")
	if r := []rune(detail); len(r) > maxDetail {
		detail = string(r[:maxDetail])
	}
	line := fmt.Sprintf("%s\t%s\t%s\t%.1f\t%s\n", client, step, result, seconds, detail)
	f, err := os.OpenFile(s.out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		_, err = f.WriteString(line)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "writing %s: %v\n", s.out, err)
	}
	fmt.Printf("[%s] %s: %s (%.1fs) %s\n", client, step, strings.ToUpper(result), seconds, detail)
}

// run runs body, whose string is the row's detail; an error (or a panic) fails the step. A
// step whose prerequisite failed is skipped without running.
func (s *scenario) run(step string, body func() (string, error), needs ...string) {
	s.done[step] = true
	var blocked []string
	for _, n := range needs {
		if s.failed[n] {
			blocked = append(blocked, n)
		}
	}
	if len(blocked) > 0 {
		s.failed[step] = true
		s.row(step, "skip", 0, fmt.Sprintf("needs %s, which failed", strings.Join(blocked, ", ")))
		return
	}
	s.tap.begin()
	start := time.Now()
	detail, err := protect(body)
	seconds := time.Since(start).Seconds()
	fmt.Fprintf(os.Stderr, "%s: %s sent %s\n", client, step, s.tap.counts())
	if err != nil {
		s.failed[step] = true
		fmt.Fprintf(os.Stderr, "%s: %s failed: %v\n", client, step, err)
		s.row(step, "fail", seconds, err.Error()+"; "+s.tap.summary())
		return
	}
	s.row(step, "pass", seconds, detail+"; "+s.tap.summary())
}

func (s *scenario) finish() int {
	for _, step := range steps {
		if !s.done[step] {
			s.failed[step] = true
			s.row(step, "fail", 0, "step did not run (scenario ended early)")
		}
	}
	if len(s.failed) > 0 {
		return 1
	}
	return 0
}

func protect(body func() (string, error)) (detail string, err error) {
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(os.Stderr, "panic: %v\n%s", p, debug.Stack())
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return body()
}

// waitFor polls cond until it reports true (or an error), or timeout passes.
func waitFor(what string, timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %.0fs waiting for %s", timeout.Seconds(), what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// within runs f and reports whether it returned within d (f keeps running if not).
func within(d time.Duration, f func()) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// ---- the steps --------------------------------------------------------------------------------

type run struct {
	brokers  []string
	topic    string
	group    string
	tap      *tap
	produced *produced
}

// config is every Sarama client's configuration: the newest protocol version, and the tap.
func (r *run) config(clientID string) *sarama.Config {
	c := sarama.NewConfig()
	c.ClientID = clientID
	c.Version = sarama.MaxVersion
	c.Net.Proxy.Enable = true
	c.Net.Proxy.Dialer = r.tap
	c.Admin.Timeout = requestTimeout
	return c
}

// adminClient is a new ClusterAdmin, one per step: Sarama 1.22's admin keeps using a
// connection the broker has closed, so a failed step would fail every later one.
func (r *run) adminClient() (sarama.ClusterAdmin, error) {
	a, err := sarama.NewClusterAdmin(r.brokers, r.config("sarama-admin"))
	if err != nil {
		return nil, fmt.Errorf("NewClusterAdmin: %w", err)
	}
	return a, nil
}

// ledPartitions is the topic's partition count once it and every partition have a leader.
func (r *run) ledPartitions(admin sarama.ClusterAdmin) (int, bool, error) {
	md, err := admin.DescribeTopics([]string{r.topic})
	if err != nil {
		return 0, false, fmt.Errorf("DescribeTopics: %w", err)
	}
	for _, t := range md {
		if t.Name != r.topic || t.Err != sarama.ErrNoError {
			continue
		}
		for _, p := range t.Partitions {
			if p.Err != sarama.ErrNoError || p.Leader < 0 {
				return 0, false, nil
			}
		}
		return len(t.Partitions), true, nil
	}
	return 0, false, nil
}

func (r *run) createTopic() (string, error) {
	admin, err := r.adminClient()
	if err != nil {
		return "", err
	}
	defer admin.Close()
	retention := retentionMs
	detail := &sarama.TopicDetail{
		NumPartitions:     partitions,
		ReplicationFactor: 1,
		ConfigEntries:     map[string]*string{"retention.ms": &retention},
	}
	if err := admin.CreateTopic(r.topic, detail, false); err != nil {
		return "", fmt.Errorf("CreateTopic: %w", err)
	}
	n := 0
	err = waitFor(r.topic+" in metadata with leaders", stepTimeout, func() (bool, error) {
		k, ok, err := r.ledPartitions(admin)
		n = k
		return ok, err
	})
	if err != nil {
		return "", err
	}
	if n != partitions {
		return "", fmt.Errorf("metadata shows %d partitions, expected %d", n, partitions)
	}
	return fmt.Sprintf("CreateTopic ok; metadata shows %d partitions, each with a leader", n), nil
}

func (r *run) listTopics() (string, error) {
	admin, err := r.adminClient()
	if err != nil {
		return "", err
	}
	defer admin.Close()
	topics, err := admin.ListTopics()
	if err != nil {
		return "", fmt.Errorf("ListTopics: %w", err)
	}
	var user []string
	for name := range topics {
		if !strings.HasPrefix(name, "__") {
			user = append(user, name)
		}
	}
	sort.Strings(user)
	d, ok := topics[r.topic]
	if !ok {
		return "", fmt.Errorf("%s not in %s", r.topic, list(user))
	}
	if d.NumPartitions != partitions {
		return "", fmt.Errorf("listed with %d partitions", d.NumPartitions)
	}
	// ListTopics also describes each topic's configs, keeping the non-default ones.
	if ret := d.ConfigEntries["retention.ms"]; ret == nil || *ret != retentionMs {
		return "", fmt.Errorf("listed with non-default configs %s, expected retention.ms=%s",
			fmtConfigs(d.ConfigEntries), retentionMs)
	}
	return fmt.Sprintf("listed with %d partitions (replication factor %d) among %d topic(s); non-default configs %s",
		d.NumPartitions, d.ReplicationFactor, len(user), fmtConfigs(d.ConfigEntries)), nil
}

func (r *run) describeConfigs() (string, error) {
	admin, err := r.adminClient()
	if err != nil {
		return "", err
	}
	defer admin.Close()
	entries, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: r.topic})
	if err != nil {
		return "", fmt.Errorf("DescribeConfig: %w", err)
	}
	byName := map[string]sarama.ConfigEntry{}
	for _, e := range entries {
		byName[e.Name] = e
	}
	ret, ok := byName["retention.ms"]
	if !ok {
		return "", fmt.Errorf("no retention.ms among %s", list(sortedKeys(byName)))
	}
	if ret.Value != retentionMs {
		return "", fmt.Errorf("retention.ms = %s, set to %s", ret.Value, retentionMs)
	}
	if ret.Default {
		return "", errors.New("retention.ms, set at creation, is reported as a default")
	}
	pol, ok := byName["cleanup.policy"]
	if !ok || pol.Value != "delete" {
		return "", fmt.Errorf("cleanup.policy = %q (present: %v), expected delete", pol.Value, ok)
	}
	if !pol.Default {
		return "", errors.New("cleanup.policy, never set, is not reported as a default")
	}
	return fmt.Sprintf("%d entries; retention.ms=%s (not default), cleanup.policy=delete (default)",
		len(entries), ret.Value), nil
}

func (r *run) producerConfig() *sarama.Config {
	c := r.config("sarama-producer")
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Idempotent = true
	c.Net.MaxOpenRequests = 1 // the idempotent producer requires it
	c.Producer.Compression = sarama.CompressionLZ4
	c.Producer.Flush.Frequency = 5 * time.Millisecond
	c.Producer.Return.Successes = true
	return c
}

// send produces messages from..to-1 and returns their delivery reports by index.
func (r *run) send(from, to int) (map[int]ack, error) {
	p, err := sarama.NewAsyncProducer(r.brokers, r.producerConfig())
	if err != nil {
		return nil, fmt.Errorf("NewAsyncProducer: %w", err)
	}
	stop := make(chan struct{})
	go func() {
		for i := from; i < to; i++ {
			h := headersOf(i)
			headers := make([]sarama.RecordHeader, len(h))
			for j, x := range h {
				headers[j] = sarama.RecordHeader{Key: []byte(x.key), Value: x.value}
			}
			msg := &sarama.ProducerMessage{
				Topic:    r.topic,
				Key:      sarama.StringEncoder(keyOf(i)),
				Value:    sarama.StringEncoder(valueOf(i)),
				Headers:  headers,
				Metadata: i,
			}
			select {
			case p.Input() <- msg:
			case <-stop:
				return
			}
		}
	}()
	acks := make(map[int]ack, to-from)
	var errs []string
	timeout := time.NewTimer(stepTimeout)
	defer timeout.Stop()
	for n := 0; n < to-from; n++ {
		select {
		case m := <-p.Successes():
			i := m.Metadata.(int)
			if _, dup := acks[i]; dup {
				errs = append(errs, fmt.Sprintf("message %d acknowledged twice", i))
				continue
			}
			acks[i] = ack{m.Partition, m.Offset}
		case e := <-p.Errors():
			errs = append(errs, fmt.Sprintf("message %v: %v", e.Msg.Metadata, e.Err))
		case <-timeout.C:
			close(stop)
			// Whatever is still in flight drains in the background.
			p.AsyncClose()
			go func() {
				for range p.Successes() {
				}
			}()
			go func() {
				for range p.Errors() {
				}
			}()
			msg := fmt.Sprintf("%d of %d delivery reports after %.0fs", n, to-from, stepTimeout.Seconds())
			if len(errs) > 0 {
				msg += fmt.Sprintf("; %d delivery errors, first: %s", len(errs), errs[0])
			}
			return nil, errors.New(msg)
		}
	}
	close(stop)
	if err := p.Close(); err != nil {
		errs = append(errs, fmt.Sprintf("closing the producer: %v", err))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%d delivery errors, first: %s", len(errs), errs[0])
	}
	return acks, nil
}

func (r *run) produce() (string, error) {
	start := time.Now()
	acks, err := r.send(0, messages)
	if err != nil {
		return "", err
	}
	took := time.Since(start).Seconds()
	if r.produced, err = checkAcks(acks, 0, messages); err != nil {
		return "", err
	}
	var counts []int64
	for _, n := range r.produced.endOffsets {
		counts = append(counts, n)
	}
	sort.Slice(counts, func(a, b int) bool { return counts[a] < counts[b] })
	return fmt.Sprintf("%d acked (acks=all, idempotent, LZ4) in %.1fs on %d partitions (%d..%d each), "+
		"offsets 0..n-1, each of %d keys on one partition",
		messages, took, partitions, counts[0], counts[len(counts)-1], keys), nil
}

// groupRead is what the members of a consumer group saw, shared by their goroutines.
type groupRead struct {
	mu        sync.Mutex
	records   map[string][]record
	assigned  map[string][]int32 // each member's current claims
	claimed   map[int32]bool     // partitions claimed, by any member
	seen      map[int]bool
	errs      []string // Consume failed: the member stopped
	asyncErrs []string // reported on the group's Errors channel
}

func newGroupRead(members []string) *groupRead {
	g := &groupRead{
		records:  map[string][]record{},
		assigned: map[string][]int32{},
		claimed:  map[int32]bool{},
		seen:     map[int]bool{},
	}
	for _, m := range members {
		g.records[m] = nil
	}
	return g
}

func (g *groupRead) failure() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.errs) == 0 {
		return nil
	}
	return fmt.Errorf("consumer errors: %s", strings.Join(first(g.errs, 3), "; "))
}

// member is one consumer of a group: a sarama.ConsumerGroupHandler that records what it reads
// and marks each message consumed (Sarama's offset manager commits the marks).
type member struct {
	name  string
	topic string
	read  *groupRead
}

func (m *member) Setup(s sarama.ConsumerGroupSession) error {
	m.read.mu.Lock()
	defer m.read.mu.Unlock()
	m.read.assigned[m.name] = append([]int32(nil), s.Claims()[m.topic]...)
	return nil
}

func (m *member) Cleanup(sarama.ConsumerGroupSession) error {
	m.read.mu.Lock()
	defer m.read.mu.Unlock()
	m.read.assigned[m.name] = nil
	return nil
}

func (m *member) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	m.read.mu.Lock()
	m.read.claimed[c.Partition()] = true
	m.read.mu.Unlock()
	for msg := range c.Messages() {
		r := toRecord(msg)
		m.read.mu.Lock()
		m.read.records[m.name] = append(m.read.records[m.name], r)
		if i, err := r.seq(); err == nil {
			m.read.seen[i] = true
		}
		m.read.mu.Unlock()
		s.MarkMessage(msg, "")
	}
	return nil
}

// startGroup starts one consumer group member per name, each consuming the topic in its own
// goroutine, re-joining after every rebalance, until the returned stop is called.
func (r *run) startGroup(group string, initial int64, read *groupRead, names ...string) (stop func() error, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var groups []sarama.ConsumerGroup
	stop = func() error {
		cancel()
		var problems []string
		if !within(60*time.Second, wg.Wait) {
			problems = append(problems, "members did not stop within 60s")
		}
		for _, g := range groups {
			g := g
			var err error
			if !within(30*time.Second, func() { err = g.Close() }) {
				problems = append(problems, "Close did not return within 30s")
			} else if err != nil {
				problems = append(problems, fmt.Sprintf("Close: %v", err))
			}
		}
		if len(problems) > 0 {
			return errors.New(strings.Join(problems, "; "))
		}
		return nil
	}
	for _, name := range names {
		cfg := r.config("sarama-" + name)
		cfg.Consumer.Offsets.Initial = initial
		cfg.Consumer.Return.Errors = true
		g, err := sarama.NewConsumerGroup(r.brokers, group, cfg)
		if err != nil {
			_ = stop()
			return nil, fmt.Errorf("NewConsumerGroup (%s): %w", name, err)
		}
		groups = append(groups, g)
		go func(name string) {
			for err := range g.Errors() {
				read.mu.Lock()
				read.asyncErrs = append(read.asyncErrs, fmt.Sprintf("%s: %v", name, err))
				read.mu.Unlock()
			}
		}(name)
		h := &member{name: name, topic: r.topic, read: read}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := g.Consume(ctx, []string{r.topic}, h); err != nil && ctx.Err() == nil {
					read.mu.Lock()
					read.errs = append(read.errs, fmt.Sprintf("%s: Consume: %v", h.name, err))
					read.mu.Unlock()
					return
				}
			}
		}()
	}
	return stop, nil
}

func (r *run) groupConsume() (string, error) {
	read := newGroupRead([]string{"m1", "m2"})
	stop, err := r.startGroup(r.group, sarama.OffsetOldest, read, "m1", "m2")
	if err != nil {
		return "", err
	}
	waitErr := waitFor("the group to read every message with both members assigned", stepTimeout, func() (bool, error) {
		read.mu.Lock()
		defer read.mu.Unlock()
		if len(read.errs) > 0 {
			return true, nil
		}
		return len(read.seen) >= messages && len(read.assigned["m1"]) > 0 && len(read.assigned["m2"]) > 0, nil
	})
	// The assignments when everything was read; stopping releases the sessions, and Sarama
	// commits the marked offsets one last time.
	final := map[string][]int32{}
	read.mu.Lock()
	for m, ps := range read.assigned {
		final[m] = ps
	}
	read.mu.Unlock()
	stopErr := stop()
	records := map[string][]record{}
	read.mu.Lock()
	for m, rs := range read.records {
		records[m] = append([]record(nil), rs...)
	}
	read.mu.Unlock()
	if err := read.failure(); err != nil {
		return "", err
	}
	if waitErr != nil {
		return "", fmt.Errorf("%v (read %d distinct, assignments %v%s)", waitErr, len(read.seen), final, asyncNote(read))
	}
	detail, err := checkGroupRead(records, final, r.produced, 0, messages)
	if err != nil {
		return "", err
	}
	if stopErr != nil {
		detail += "; stopping: " + stopErr.Error()
	}
	return detail + asyncNote(read), nil
}

func asyncNote(read *groupRead) string {
	read.mu.Lock()
	defer read.mu.Unlock()
	if len(read.asyncErrs) == 0 {
		return ""
	}
	return fmt.Sprintf("; %d errors reported by the group, first: %s", len(read.asyncErrs), read.asyncErrs[0])
}

func (r *run) committedOffsets() (string, error) {
	admin, err := r.adminClient()
	if err != nil {
		return "", err
	}
	defer admin.Close()
	ps := make([]int32, partitions)
	for p := range ps {
		ps[p] = int32(p)
	}
	resp, err := admin.ListConsumerGroupOffsets(r.group, map[string][]int32{r.topic: ps})
	if err != nil {
		return "", fmt.Errorf("ListConsumerGroupOffsets: %w", err)
	}
	committed := map[int32]int64{}
	for _, p := range ps {
		b := resp.GetBlock(r.topic, p)
		if b == nil {
			return "", fmt.Errorf("no offset for partition %d in the response", p)
		}
		if b.Err != sarama.ErrNoError {
			return "", fmt.Errorf("partition %d: %v", p, b.Err)
		}
		committed[p] = b.Offset
	}
	detail, err := checkCommitted(committed, r.produced)
	if err != nil {
		return "", err
	}
	return "OffsetFetch via ClusterAdmin.ListConsumerGroupOffsets: " + detail, nil
}

func (r *run) latestGroup() (string, error) {
	read := newGroupRead([]string{"latest"})
	stop, err := r.startGroup(r.topic+"-latest", sarama.OffsetNewest, read, "latest")
	if err != nil {
		return "", err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = stop()
		}
	}()
	// A claim exists once Sarama has resolved its starting offset (for "newest", ListOffsets
	// latest); a consumer positioned before the end reads old messages within the quiet time.
	err = waitFor("6 partitions claimed", stepTimeout, func() (bool, error) {
		if err := read.failure(); err != nil {
			return false, err
		}
		read.mu.Lock()
		defer read.mu.Unlock()
		return len(read.claimed) == partitions, nil
	})
	if err != nil {
		return "", fmt.Errorf("%v%s", err, asyncNote(read))
	}
	time.Sleep(quiet)
	read.mu.Lock()
	early := len(read.records["latest"])
	read.mu.Unlock()
	if early > 0 {
		return "", fmt.Errorf("read %d old messages before anything new was produced", early)
	}
	if _, err := r.send(messages, messages+newMessages); err != nil {
		return "", fmt.Errorf("producing the new messages: %w", err)
	}
	err = waitFor(fmt.Sprintf("%d new messages", newMessages), stepTimeout, func() (bool, error) {
		if err := read.failure(); err != nil {
			return false, err
		}
		read.mu.Lock()
		defer read.mu.Unlock()
		return len(read.records["latest"]) >= newMessages, nil
	})
	if err != nil {
		return "", fmt.Errorf("%v%s", err, asyncNote(read))
	}
	time.Sleep(quiet)
	stopped = true
	stopErr := stop()
	read.mu.Lock()
	records := append([]record(nil), read.records["latest"]...)
	read.mu.Unlock()
	detail, err := checkLatest(records)
	if err != nil {
		return "", err
	}
	// Positioned at the end offsets: on each partition the new messages went to, the first one
	// read is at the offset that was the end before they were produced.
	firstRead := map[int32]int64{}
	for _, rec := range records {
		if o, ok := firstRead[rec.partition]; !ok || rec.offset < o {
			firstRead[rec.partition] = rec.offset
		}
	}
	for p, o := range firstRead {
		if end := r.produced.endOffsets[p]; o != end {
			return "", fmt.Errorf("partition %d: first message read at offset %d, the end offset was %d", p, o, end)
		}
	}
	detail = fmt.Sprintf("positioned at the end offsets (the first message read on each of %d partitions "+
		"is at its old end offset); %s", len(firstRead), detail)
	if stopErr != nil {
		detail += "; stopping: " + stopErr.Error()
	}
	return detail + asyncNote(read), nil
}

func (r *run) deleteTopic() (string, error) {
	admin, err := r.adminClient()
	if err != nil {
		return "", err
	}
	defer admin.Close()
	if err := admin.DeleteTopic(r.topic); err != nil {
		return "", fmt.Errorf("DeleteTopic: %w", err)
	}
	// Listed: in a Metadata response for all topics.
	c, err := sarama.NewClient(r.brokers, r.config("sarama-lister"))
	if err != nil {
		return "", fmt.Errorf("NewClient: %w", err)
	}
	defer c.Close()
	listed := func() (bool, error) {
		if err := c.RefreshMetadata(); err != nil {
			return false, fmt.Errorf("RefreshMetadata: %w", err)
		}
		topics, err := c.Topics()
		if err != nil {
			return false, err
		}
		for _, t := range topics {
			if t == r.topic {
				return true, nil
			}
		}
		return false, nil
	}
	err = waitFor(r.topic+" gone from metadata", stepTimeout, func() (bool, error) {
		there, err := listed()
		return !there, err
	})
	if err != nil {
		return "", err
	}
	time.Sleep(time.Second)
	if there, err := listed(); err != nil {
		return "", err
	} else if there {
		return "", errors.New("topic came back")
	}
	return "DeleteTopic ok; the topic is no longer listed", nil
}

// ---- the tap: which requests Sarama sends -----------------------------------------------------

var apiNames = map[int16]string{
	0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit", 9: "OffsetFetch",
	10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup",
	15: "DescribeGroups", 16: "ListGroups", 17: "SaslHandshake", 18: "ApiVersions",
	19: "CreateTopics", 20: "DeleteTopics", 21: "DeleteRecords", 22: "InitProducerId",
	23: "OffsetForLeaderEpoch", 24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn", 26: "EndTxn",
	28: "TxnOffsetCommit", 29: "DescribeAcls", 30: "CreateAcls", 31: "DeleteAcls",
	32: "DescribeConfigs", 33: "AlterConfigs", 35: "DescribeLogDirs", 36: "SaslAuthenticate",
	37: "CreatePartitions", 42: "DeleteGroups",
}

type request struct{ key, version int16 }

func (q request) String() string {
	name, ok := apiNames[q.key]
	if !ok {
		name = fmt.Sprintf("api %d", q.key)
	}
	return fmt.Sprintf("%s v%d", name, q.version)
}

// tap is Sarama's dialer (Net.Proxy.Dialer): it connects directly and watches the request
// headers going out and the response frames coming back, to say which requests a step sent
// and which one the broker did not answer when it closed a connection.
type tap struct {
	mu     sync.Mutex
	count  map[request]int
	order  []request
	events []string
}

func newTap() *tap { return &tap{count: map[request]int{}} }

// Dial implements golang.org/x/net/proxy.Dialer.
func (t *tap) Dial(network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: requestTimeout, KeepAlive: requestTimeout}
	conn, err := d.Dial(network, addr)
	if err != nil {
		return nil, err
	}
	c := &tapConn{Conn: conn, tap: t}
	c.out = frames{want: 8, onHeader: c.sent}
	c.in = frames{want: 4, onHeader: c.answered}
	return c, nil
}

func (t *tap) begin() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.count = map[request]int{}
	t.order = nil
	t.events = nil
}

func (t *tap) saw(q request) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.count[q] == 0 {
		t.order = append(t.order, q)
	}
	t.count[q]++
}

func (t *tap) event(e string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, x := range t.events {
		if x == e {
			return
		}
	}
	t.events = append(t.events, e)
}

// summary names the connection events and the requests sent since begin, in first-sent order.
func (t *tap) summary() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	names := make([]string, len(t.order))
	for i, q := range t.order {
		names[i] = q.String()
	}
	sent := "sent " + strings.Join(names, ", ")
	if len(names) == 0 {
		sent = "sent no requests"
	}
	return strings.Join(append(append([]string(nil), t.events...), sent), "; ")
}

// counts is summary with how many of each request.
func (t *tap) counts() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var parts []string
	for _, q := range t.order {
		parts = append(parts, fmt.Sprintf("%s x%d", q, t.count[q]))
	}
	return strings.Join(append(parts, t.events...), ", ")
}

type tapConn struct {
	net.Conn
	tap *tap

	mu       sync.Mutex
	out, in  frames
	inFlight []request // sent, response not started yet (Kafka answers in order)
	closed   bool
	reported bool
}

func (c *tapConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.mu.Lock()
	c.out.feed(p[:n])
	c.mu.Unlock()
	return n, err
}

func (c *tapConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.in.feed(p[:n])
	if err != nil && !c.closed && !c.reported {
		var ne net.Error
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
			c.reported = true
			c.tap.event("broker closed a connection " + c.pending())
		case errors.As(err, &ne) && ne.Timeout():
			c.reported = true
			c.tap.event("no answer in time " + c.pending())
		}
	}
	return n, err
}

func (c *tapConn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	return c.Conn.Close()
}

// pending names the first request the broker did not answer; c.mu is held.
func (c *tapConn) pending() string {
	if len(c.inFlight) == 0 {
		return "with no request pending"
	}
	return "without answering " + c.inFlight[0].String()
}

func (c *tapConn) sent(hdr []byte) {
	q := request{int16(binary.BigEndian.Uint16(hdr[4:6])), int16(binary.BigEndian.Uint16(hdr[6:8]))}
	c.inFlight = append(c.inFlight, q)
	c.tap.saw(q)
}

func (c *tapConn) answered([]byte) {
	if len(c.inFlight) > 0 {
		c.inFlight = c.inFlight[1:]
	}
}

// frames splits a byte stream into Kafka frames (a 4-byte big-endian size, then that many
// bytes) and hands the first want bytes of each to onHeader.
type frames struct {
	want     int
	hdr      [8]byte
	n        int
	skip     int
	onHeader func(hdr []byte)
}

func (f *frames) feed(p []byte) {
	for len(p) > 0 {
		if f.skip > 0 {
			k := f.skip
			if k > len(p) {
				k = len(p)
			}
			f.skip -= k
			p = p[k:]
			continue
		}
		k := copy(f.hdr[f.n:f.want], p)
		f.n += k
		p = p[k:]
		if f.n == f.want {
			size := int(int32(binary.BigEndian.Uint32(f.hdr[:4])))
			f.onHeader(f.hdr[:f.want])
			f.skip = size - (f.want - 4)
			f.n = 0
		}
	}
}

// ---- formatting, Python-like, so rows read like the other clients' ---------------------------

func quote(b []byte) string {
	if b == nil {
		return "None"
	}
	return strconv.Quote(string(b))
}

func fmtHeaders(hs []header) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = fmt.Sprintf("(%q, %s)", h.key, quote(h.value))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func fmtOffsets(m map[int32]int64) string {
	parts := make([]string, 0, len(m))
	for _, p := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%d: %d", p, m[p]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func fmtConfigs(m map[string]*string) string {
	parts := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		v := "null"
		if m[k] != nil {
			v = *m[k]
		}
		parts = append(parts, k+"="+v)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func list[T any](xs []T) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func first[T any](xs []T, n int) []T {
	if len(xs) > n {
		return xs[:n]
	}
	return xs
}

type ordered interface {
	~int | ~int32 | ~int64 | ~string
}

func sortedKeys[K ordered, V any](m map[K]V) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(a, b int) bool { return ks[a] < ks[b] })
	return ks
}

// splitKeys counts the keys seen on more than one partition and names the first.
func splitKeys(keyPartitions map[string]map[int32]bool) (string, int) {
	example, n := "", 0
	for _, k := range sortedKeys(keyPartitions) {
		if len(keyPartitions[k]) > 1 {
			if n == 0 {
				example = k
			}
			n++
		}
	}
	return example, n
}

func allPartitions(set map[int32]bool) bool {
	for p := int32(0); p < partitions; p++ {
		if !set[p] {
			return false
		}
	}
	return true
}

// ---- main -------------------------------------------------------------------------------------

func main() { os.Exit(runScenario()) }

// runScenario runs every step and returns the exit status: 1 if any step failed.
func runScenario() int {
	bootstrap := flag.String("bootstrap", "", "host:port of a fresh broker")
	results := flag.String("results", "", "TSV file to append one row per step to")
	topic := flag.String("topic", "scenario-"+client, "the topic to create, use and delete")
	saramaLog := flag.String("sarama-log", "", "file for Sarama's own log (default: discarded)")
	flag.Parse()
	if *bootstrap == "" || *results == "" {
		fmt.Fprintln(os.Stderr, "--bootstrap and --results are required")
		flag.Usage()
		return 2
	}
	if *saramaLog != "" {
		f, err := os.Create(*saramaLog)
		if err != nil {
			fmt.Fprintf(os.Stderr, "--sarama-log: %v\n", err)
			return 2
		}
		defer f.Close()
		sarama.Logger = log.New(f, "[sarama] ", log.LstdFlags|log.Lmicroseconds)
	}

	t := newTap()
	s := &scenario{out: *results, tap: t, failed: map[string]bool{}, done: map[string]bool{}}
	r := &run{brokers: strings.Split(*bootstrap, ","), topic: *topic, group: *topic + "-group", tap: t}
	s.run("create-topic", r.createTopic)
	s.run("list-topics", r.listTopics, "create-topic")
	s.run("describe-configs", r.describeConfigs, "create-topic")
	s.run("produce", r.produce, "create-topic")
	s.run("group-consume", r.groupConsume, "produce")
	s.run("committed-offsets", r.committedOffsets, "group-consume")
	s.run("latest-group", r.latestGroup, "produce")
	s.run("delete-topic", r.deleteTopic, "create-topic")
	return s.finish()
}
