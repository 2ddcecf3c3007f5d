// Package bus is tribunal's event backbone on NATS JetStream: it provisions the stream,
// the durable consumers and the key-value buckets, and adapts JetStream to Watermill's
// Publisher and Subscriber so every service runs its handler in a Watermill router with
// the same middleware (retry, dead letters, recoverer, correlation ids).
//
// Why not watermill-nats: its stable package uses the legacy JetStream API, never calls
// InProgress for long handlers, and can create or delete durables on its own; its beta
// package cannot publish dotted subjects and sets no message id. tribunal creates every
// stream and durable itself and binds to them, so scale-down never deletes a consumer and
// every publish carries the event id as Nats-Msg-Id.
package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kv"
)

// Service names; each has one durable consumer shared by all of its instances.
const (
	Renderer   = "renderer"
	Gater      = "gater"
	Judge      = "judge"
	Aggregator = "aggregator"
)

// Services lists the four services in flow order.
var Services = []string{Renderer, Gater, Judge, Aggregator}

// ServiceInputs are the event types each service consumes.
var ServiceInputs = map[string][]events.Type{
	Renderer:   {events.TypeRenderRequested},
	Gater:      {events.TypeRenderDone},
	Judge:      {events.TypeGatesDone},
	Aggregator: {events.TypeJobSubmitted, events.TypeGatesFailed, events.TypeVerdictEmitted, events.TypeRenderUnchanged, events.TypeSpotcheckRecorded, events.TypeViewReset, events.TypeBatchOpened, events.TypeBatchCancelRequested, events.TypeJobCancelRequested, events.TypeReviewRecorded},
}

// ServiceOutputs are the event types each service publishes, besides its dead letters:
// all its NATS user may publish in the authorization `tribunal tenants` writes.
var ServiceOutputs = map[string][]events.Type{
	Renderer: {events.TypeRenderDone},
	Gater:    {events.TypeGatesDone, events.TypeGatesFailed, events.TypeRenderUnchanged},
	Judge:    {events.TypeVerdictEmitted},
	Aggregator: {events.TypeRenderRequested, events.TypeIterationDecided, events.TypeSignoffRecorded,
		events.TypeManifestEmitted, events.TypeJobBlocked, events.TypeBatchCompleted},
}

// Key-value buckets.
const (
	// BucketJobs holds one record per job, keyed "<tenant>.<batch>.<ac>".
	BucketJobs = "tribunal_jobs"
	// BucketBatches holds batch headers and completion shards.
	BucketBatches = "tribunal_batches"
	// BucketCache holds judge-call results shared by every judge instance.
	BucketCache = "tribunal_cache"
	// BucketViews holds rubric view state across iterations and runs.
	BucketViews = "tribunal_views"
)

// Config is the stream and consumer configuration. Zero values take the defaults.
type Config struct {
	// Stream is the stream name.
	Stream string
	// MaxAge bounds how long events are kept: the audit horizon. Zero keeps them forever.
	MaxAge time.Duration
	// DuplicateWindow is how long JetStream remembers message ids to drop duplicates
	// (default DefaultDuplicateWindow). The server keeps every id of the window in
	// memory, about 0.6 KB per AC: a window that outlasts a batch holds all of its ids.
	DuplicateWindow time.Duration
	// AckWait is how long a delivered message may stay unacknowledged before it is
	// redelivered; handlers longer than this extend it with InProgress.
	AckWait time.Duration
	// MaxDeliver bounds deliveries of a failing message; the last one goes to dead
	// letters. The routers enforce it (the server-side consumer is unbounded).
	MaxDeliver int
	// MaxAckPending bounds unacknowledged messages per consumer across all instances.
	MaxAckPending int
	// Replicas is the replication factor of the stream, its consumers and the key-value
	// buckets: 1 on a single server, 3 on a three-node JetStream cluster, where every
	// event and every bit of state survives losing one server. Provision scales existing
	// assets up or down to it.
	Replicas int
	// Memory selects memory storage instead of file storage (tests and benchmarks only).
	Memory bool
	// Tenants, when set, gives every service one durable per tenant instead of one
	// shared durable (see ConsumerNames). Only these tenants are served.
	Tenants []string
	// Services whose durables Provision creates: nil means every service's. A service
	// process provisions its own only, so its NATS user needs no right on another
	// service's consumers.
	Services []string
}

func (c Config) withDefaults() Config {
	if c.Stream == "" {
		c.Stream = "TRIBUNAL"
	}
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = DefaultDuplicateWindow
	}
	if c.AckWait == 0 {
		c.AckWait = 30 * time.Second
	}
	if c.MaxDeliver == 0 {
		c.MaxDeliver = 8
	}
	if c.MaxAckPending == 0 {
		c.MaxAckPending = 4096
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	return c
}

// DefaultDuplicateWindow is a stream's duplicate window unless configured: long enough for
// a service restarted, a client's submission resumed or a cluster's member replaced
// within it to publish again without storing copies.
const DefaultDuplicateWindow = 2 * time.Hour

// RedeliveryHorizon is how long after an event is first stored a live process can
// publish it again, for the stream and consumers of cfg and the publisher's and routers'
// defaults: the duplicate window that drops every copy a redelivery makes, short of a
// restart (AlreadyPublished covers that, and in the all-in-one mode covers it instead).
//
// An output stored in one delivery of its input is published again only by a later
// delivery of that input, and there are at most MaxDeliver of them. Each delivery's
// outputs are sent, under their ids, for at most PublishTimeout (the router's in-process
// retries of the handler before it, 100 + 200 ms, are added); the next delivery follows
// at most max(AckWait, the subscriber's longest nak delay) after the previous one ended:
// AckWait after an ack that was lost or a delivery whose process went quiet, the nak
// delay (500 ms doubling to 30 s) after a failed one. So the last copy comes at most
//
//	MaxDeliver x (PublishTimeout + retries) + (MaxDeliver - 1) x max(AckWait, nak delay)
//
// after the first store: 8 x 30.3 s + 7 x 30 s = 452.4 s with the defaults. What it does
// not count is the handlers' own time between deliveries: a redelivered handler repeats
// work whose slow part, the judge's call, is cached by the first one.
func RedeliveryHorizon(cfg Config) time.Duration {
	cfg = cfg.withDefaults()
	retries, wait := time.Duration(0), defaultRetryInitial
	for range defaultMaxRetries {
		retries += wait
		wait = min(2*wait, defaultRetryMax)
	}
	deliveries := time.Duration(cfg.MaxDeliver)
	return deliveries*(PublishTimeout+retries) + (deliveries-1)*max(cfg.AckWait, defaultNakMax)
}

// LocalHorizon is how long the all-in-one mode's publisher keeps the ids it has stored
// (AlreadyPublished) and how far back a restart reads the stream's tail (ReadPublished):
// the live redelivery horizon of the default configuration (RedeliveryHorizon, 452.4 s)
// rounded up to whole minutes, 8 minutes.
func LocalHorizon() time.Duration {
	return RedeliveryHorizon(Config{}).Truncate(time.Minute) + time.Minute
}

// LocalDuplicateWindow is the all-in-one mode's server-side duplicate window. Its stream
// has one publisher at a time: every command that publishes to it (run, the external
// judge's, view's and the local readers' aggregator) holds the state folder's lock
// (cmd/tribunal lockState) while its embedded server runs. That publisher keeps the ids
// it has stored for the whole horizon itself (AlreadyPublished, LocalHorizon), pointer-free,
// so the server's window is left only what the publisher cannot know: a send whose ack
// never came back (lost, or the Publish gave up waiting) and the later sends of the same
// id. Those come from one delivery of the handler: one Publish resends under its ids for
// at most PublishTimeout (30 s), and the router runs the handler again twice in process,
// 100 and 200 ms later, so the sends of one delivery span at most 3 x 30.3 s = 90.9 s; a
// later delivery starts only after this one's handler failed, and publishes
// again what the index holds once any of those sends was acked. Concurrent handlers of
// one input do not happen: a handler running longer than AckWait extends it (the
// subscriber's InProgress), so the server does not hand its message to another. Two
// minutes covers the 90.9 s with a margin, and the server holds the ids of 2 minutes of
// a batch instead of 8 (about 150 B each, pointer-rich: the collector marks them on
// every cycle).
func LocalDuplicateWindow() time.Duration { return 2 * time.Minute }

// ConsumerName is the durable consumer of a service.
func ConsumerName(service string) string { return "tribunal-" + service }

// Provision creates or updates the stream, the durable consumers of cfg.Services (every
// service's by default) and the key-value buckets. It is idempotent: a second call, or a
// second instance starting at the same time, changes nothing. A request a JetStream
// cluster leaves unanswered or refuses for the moment (IsTransient) is retried until ctx
// ends.
func Provision(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	cfg = cfg.withDefaults()
	if cfg.Replicas < 1 || cfg.Replicas > MaxReplicas {
		return fmt.Errorf("provision: replicas %d: want 1 to %d", cfg.Replicas, MaxReplicas)
	}
	for _, t := range cfg.Tenants {
		if err := events.ValidateTenant(t); err != nil {
			return fmt.Errorf("provision: %w", err)
		}
	}
	storage := jetstream.FileStorage
	if cfg.Memory {
		storage = jetstream.MemoryStorage
	}
	err := RetryTransient(ctx, func(ctx context.Context) error {
		_, err := js.CreateOrUpdateStream(ctx, streamConfig(cfg, storage))
		return err
	})
	if err != nil {
		return fmt.Errorf("provision stream %s: %w", cfg.Stream, replicasHint(err, cfg.Replicas))
	}
	services := cfg.Services
	if services == nil {
		services = Services
	}
	for _, svc := range services {
		for _, cc := range consumerConfigs(svc, cfg) {
			err := RetryTransient(ctx, func(ctx context.Context) error {
				_, err := js.CreateOrUpdateConsumer(ctx, cfg.Stream, cc)
				return err
			})
			if err != nil {
				return fmt.Errorf("provision consumer %s: %w", cc.Durable, err)
			}
		}
	}
	for _, b := range []jetstream.KeyValueConfig{
		{Bucket: BucketJobs, Description: "job records", History: 1},
		{Bucket: BucketBatches, Description: "batch headers and completion shards", History: 1},
		{Bucket: BucketCache, Description: "judge-call cache", History: 1},
		{Bucket: BucketViews, Description: "rubric view state", History: 1},
	} {
		b.Storage = storage
		b.Replicas = cfg.Replicas
		err := RetryTransient(ctx, func(ctx context.Context) error {
			_, err := js.CreateOrUpdateKeyValue(ctx, b)
			return err
		})
		if err != nil {
			return fmt.Errorf("provision bucket %s: %w", b.Bucket, replicasHint(err, cfg.Replicas))
		}
	}
	return nil
}

func streamConfig(cfg Config, storage jetstream.StorageType) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        cfg.Stream,
		Description: "tribunal events: the audit log",
		Subjects:    []string{events.SubjectRoot + ".>"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     storage,
		MaxAge:      cfg.MaxAge,
		Duplicates:  cfg.DuplicateWindow,
		Replicas:    cfg.Replicas,
		Discard:     jetstream.DiscardOld,
	}
}

// An attempt of a provisioning request waits firstAttempt for its answer, and each
// retry twice as long, up to maxAttempt. A cluster can leave a request unanswered: while
// it elects a leader, and when several instances create the same stream or consumer at
// once (only the first identical request in flight is answered). Answers normally take
// milliseconds, so a short first wait keeps a fresh deployment's start quick, and the
// longer ones leave room for a loaded cluster.
const (
	firstAttempt = time.Second
	maxAttempt   = 8 * time.Second
)

// RetryTransient calls f, each time with a longer deadline, until it succeeds, fails with
// an error that is not transient (IsTransient), or ctx ends. It is for idempotent
// JetStream API requests, such as creating a stream or a bucket.
func RetryTransient(ctx context.Context, f func(context.Context) error) error {
	return retry(ctx, IsTransient, f)
}

// RetryUnapplied is RetryTransient for requests that are not idempotent, such as a
// compare-and-set: it retries only errors that prove the request was not carried out
// (Unapplied). A request that timed out may have been stored, so it is returned to the
// caller, whose compare-and-set then finds the new revision and looks again.
func RetryUnapplied(ctx context.Context, f func(context.Context) error) error {
	return retry(ctx, Unapplied, f)
}

// retry calls f with attempts from firstAttempt doubling to maxAttempt while again(err)
// holds and ctx lasts.
func retry(ctx context.Context, again func(error) bool, f func(context.Context) error) error {
	attempt := firstAttempt
	for {
		actx, cancel := context.WithTimeout(ctx, attempt)
		err := f(actx)
		cancel()
		if err == nil || !again(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
		attempt = min(2*attempt, maxAttempt)
	}
}

// Unapplied reports a transient error that proves no server carried the request out:
// nobody answered it (a stream without a leader while the cluster elects one) or the
// cluster refused it for the moment.
func Unapplied(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == errCodeClusterNotAvail || apiErr.ErrorCode == errCodeClusterNotLeader
	}
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse)
}

// JetStream API error codes of a cluster that cannot answer for the moment.
const (
	errCodeClusterNotAvail   = 10008 // JetStream system temporarily unavailable
	errCodeClusterNotLeader  = 10009 // JetStream cluster can not handle request
	errCodeDuplicateInFlight = 10158 // duplicate message id is in process
)

// IsTransient reports an error that a JetStream cluster returns while it elects a
// leader or a server restarts: a request or a publish timed out or found no responder
// (no stream leader), the connection was lost, the cluster said it is temporarily
// unavailable, or a message published again is still being stored under its first
// publish (the retry then finds it stored), or a replicated asset found a member "offline"
// (placementPending). The same request can succeed a moment later, so callers retry it
// rather than give up on the work.
func IsTransient(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == errCodeClusterNotAvail || apiErr.ErrorCode == errCodeClusterNotLeader ||
			apiErr.ErrorCode == errCodeDuplicateInFlight || placementPending(apiErr)
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, nats.ErrDisconnected) || errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, jetstream.ErrAsyncPublishTimeout)
}

// MaxReplicas is JetStream's largest replication factor.
const MaxReplicas = 5

// JetStream API error codes of a replication factor the servers cannot place.
const (
	errCodeReplicasNotSupported = 10074 // replicas > 1 not supported in non-clustered mode
	errCodeNoSuitablePeers      = 10005 // no suitable peers for placement
	errCodeInsufficientRes      = 10023 // insufficient resources
)

// placementPending reports a refusal to place a replicated asset because a member is
// "offline", which the meta leader says of a member it has not yet had statistics from
// (a cluster formed seconds ago: services and servers starting together) and when too
// few members are up for a quorum (a restart). Both pass; a cluster with too few members
// is refused without "peer offline" and stays an error at once.
func placementPending(apiErr *jetstream.APIError) bool {
	return apiErr.ErrorCode == errCodeNoSuitablePeers && strings.Contains(apiErr.Description, "peer offline")
}

// replicasHint says what a replicated stream or bucket needs when the servers refused
// it for that reason.
func replicasHint(err error, replicas int) error {
	var apiErr *jetstream.APIError
	if replicas <= 1 || !errors.As(err, &apiErr) {
		return err
	}
	switch apiErr.ErrorCode {
	case errCodeReplicasNotSupported:
		return fmt.Errorf("replicas %d needs a JetStream cluster, and this server is standalone (form one with `tribunal serve nats --cluster-listen ... --routes ...`, or use --replicas 1): %w", replicas, err)
	case errCodeNoSuitablePeers, errCodeInsufficientRes:
		return fmt.Errorf("replicas %d needs at least %d JetStream servers in the cluster, each up and with room: %w", replicas, replicas, err)
	}
	return err
}

// TenantConsumerName is a service's durable for one tenant, when tenants are configured.
func TenantConsumerName(service, tenant string) string { return "tribunal-" + service + "-" + tenant }

// DeadLetterConsumerName is the aggregator's durable for every service's dead letters,
// when tenants are configured.
const DeadLetterConsumerName = "tribunal-aggregator-dlq"

// ConsumerNames lists the durables a service consumes: one shared across tenants, or,
// with tenants configured, one per tenant (plus the aggregator's dead-letter durable).
// Per-tenant durables let each instance cap every tenant's messages in flight, so one
// team's huge batch cannot starve another's small one; a single durable is strictly
// first come, first served.
func ConsumerNames(service string, tenants []string) []string {
	if len(tenants) == 0 {
		return []string{ConsumerName(service)}
	}
	var out []string
	for _, t := range tenants {
		out = append(out, TenantConsumerName(service, t))
	}
	if service == Aggregator {
		out = append(out, DeadLetterConsumerName)
	}
	return out
}

func consumerConfigs(service string, cfg Config) []jetstream.ConsumerConfig {
	if len(cfg.Tenants) == 0 {
		var filters []string
		for _, t := range ServiceInputs[service] {
			filters = append(filters, events.AnyTenant(t))
		}
		if service == Aggregator {
			// Dead letters of every service: the aggregator blocks the jobs they belong to.
			filters = append(filters, events.DeadLetterPrefix+".>")
		}
		return []jetstream.ConsumerConfig{consumerConfig(ConsumerName(service), "tribunal "+service, filters, cfg)}
	}
	var out []jetstream.ConsumerConfig
	for _, tenant := range cfg.Tenants {
		var filters []string
		for _, t := range ServiceInputs[service] {
			s, _ := events.Subject(tenant, t)
			filters = append(filters, s)
		}
		out = append(out, consumerConfig(TenantConsumerName(service, tenant), "tribunal "+service+" for "+tenant, filters, cfg))
	}
	if service == Aggregator {
		out = append(out, consumerConfig(DeadLetterConsumerName, "tribunal aggregator dead letters", []string{events.DeadLetterPrefix + ".>"}, cfg))
	}
	return out
}

func consumerConfig(durable, description string, filters []string, cfg Config) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:        durable,
		Description:    description,
		FilterSubjects: filters,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        cfg.AckWait,
		// The delivery bound is enforced by the router (see exhausted), not the server:
		// a server-side limit would silently drop a message whose last delivery was cut
		// short by a shutdown, while the router dead-letters real failures and hands
		// interrupted ones back.
		MaxDeliver:    -1,
		MaxAckPending: cfg.MaxAckPending,
	}
}

// Buckets are the key-value buckets Provision created, as OpenBuckets opens them.
type Buckets = kv.Buckets

// OpenBuckets binds to the provisioned buckets, retrying what a cluster cannot answer
// for the moment.
func OpenBuckets(ctx context.Context, js jetstream.JetStream) (Buckets, error) {
	var b Buckets
	for _, o := range []struct {
		name string
		kv   *kv.KV
	}{{BucketJobs, &b.Jobs}, {BucketBatches, &b.Batches}, {BucketCache, &b.Cache}, {BucketViews, &b.Views}} {
		err := RetryTransient(ctx, func(ctx context.Context) error {
			kv, err := js.KeyValue(ctx, o.name)
			*o.kv = kv
			return err
		})
		if err != nil {
			return b, fmt.Errorf("open bucket %s: %w", o.name, err)
		}
	}
	b.JS = js
	return b, nil
}
