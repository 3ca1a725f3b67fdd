// sstf: shortest seek time first, with aging, written in C against the WIT's C bindings.
//
// Dispatch sends the queued request whose start is nearest to where the last one ended.
// Nearest-first alone starves requests far from a busy region, so a request that has
// waited `max_wait_ms` goes first, oldest first. Ties go to the lower sector, then the
// lower id, so the order depends only on what the host said.
//
// Built by `schedhost policy build examples/sstf-policy`: the kit generates policy.h and
// policy.c (wit-bindgen's C generator) into target/bindings/, compiles with clang's
// wasm32 target, embeds the world and componentizes. The conventions of those bindings:
// arguments belong to the callee (free them), results are malloc'ed and the bindings' post-
// return frees them.

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

#define NS_PER_MS 1000000ull
// `turn` results (wit/policy.wit): the first word, then the wake-up (sstf asks for none).
#define TURN_NONE UINT64_MAX
#define TURN_MORE (UINT64_MAX - 1)
#define TURN_NO_WAKE UINT64_MAX
// `turn` control bits.
#define TURN_REQUEST 2u
#define TURN_DISPATCH 4u
// Words per packed request in `insert` and `turn`.
#define WORDS 5
// Words per packed merge event in `turn-words`.
#define MERGE_WORDS 4

typedef exports_schedhost_policy_scheduler_dispatch_answer_t answer_t;

typedef struct {
    uint64_t id;
    uint64_t sector;
    uint32_t sectors;
    uint64_t arrival_ns;
} queued_t;

// The one tunable: name, default and range.
static const char TUNABLE[] = "max_wait_ms";
static const int64_t WAIT_DEFAULT = 100, WAIT_MIN = 1, WAIT_MAX = 60000;

static struct {
    queued_t *queue;
    size_t len, cap;
    // Where the last dispatched request ended.
    uint64_t head;
    int64_t max_wait_ms;
    // The answer of the last `turn` that returned TURN_MORE.
    uint64_t *kept;
    size_t kept_len, kept_cap;
} s = {.max_wait_ms = 100};

// Out of memory inside the sandbox: trap, and the host ejects the policy.
static void *grow(void *ptr, size_t count, size_t size) {
    if (count != 0 && size > SIZE_MAX / count) abort();
    void *grown = realloc(ptr, count * size);
    if (grown == NULL && count != 0) abort();
    return grown;
}

static void enqueue(const uint64_t *w) {
    if (s.len == s.cap) {
        s.cap = s.cap ? 2 * s.cap : 64;
        s.queue = grow(s.queue, s.cap, sizeof *s.queue);
    }
    // The packed layout: [id, sector, arrival-ns, sectors | ctx << 32, flags].
    s.queue[s.len++] = (queued_t){
        .id = w[0], .sector = w[1], .arrival_ns = w[2], .sectors = (uint32_t)w[3]};
}

static size_t find(uint64_t id) {
    for (size_t i = 0; i < s.len; i++)
        if (s.queue[i].id == id) return i;
    return SIZE_MAX;
}

static void remove_at(size_t i) {
    s.queue[i] = s.queue[--s.len];
}

static uint64_t distance(uint64_t a, uint64_t b) {
    return a > b ? a - b : b - a;
}

// True iff queued request a goes before b.
static bool before(const queued_t *a, const queued_t *b, uint64_t now_ns) {
    uint64_t wait = (uint64_t)s.max_wait_ms * NS_PER_MS;
    bool a_aged = now_ns >= a->arrival_ns && now_ns - a->arrival_ns >= wait;
    bool b_aged = now_ns >= b->arrival_ns && now_ns - b->arrival_ns >= wait;
    if (a_aged != b_aged) return a_aged;
    if (a_aged && a->arrival_ns != b->arrival_ns) return a->arrival_ns < b->arrival_ns;
    uint64_t da = distance(a->sector, s.head), db = distance(b->sector, s.head);
    if (da != db) return da < db;
    if (a->sector != b->sector) return a->sector < b->sector;
    return a->id < b->id;
}

// Takes the next request off the queue; the queue must not be empty.
static uint64_t take_next(uint64_t now_ns) {
    size_t best = 0;
    for (size_t i = 1; i < s.len; i++)
        if (before(&s.queue[i], &s.queue[best], now_ns)) best = i;
    queued_t next = s.queue[best];
    remove_at(best);
    s.head = next.sector + next.sectors;
    return next.id;
}

// Up to `budget` ids into a fresh list.
static policy_list_u64_t pick(uint64_t now_ns, uint32_t budget) {
    size_t n = budget < s.len ? budget : s.len;
    policy_list_u64_t ids = {.ptr = grow(NULL, n, sizeof(uint64_t)), .len = n};
    for (size_t i = 0; i < n; i++) ids.ptr[i] = take_next(now_ns);
    return ids;
}

static bool name_is(const policy_string_t *name, const char *want) {
    return name->len == strlen(want) && memcmp(name->ptr, want, name->len) == 0;
}

// Checks a setting as the Rust SDK does; on refusal `err` holds the reason.
static bool check(const policy_string_t *name, int64_t value, policy_string_t *err) {
    if (!name_is(name, TUNABLE)) {
        policy_string_dup(err, "sstf has no such tunable (it has: max_wait_ms)");
        return false;
    }
    if (value < WAIT_MIN || value > WAIT_MAX) {
        policy_string_dup(err, "sstf: max_wait_ms is out of range 1..=60000 ms");
        return false;
    }
    return true;
}

void exports_schedhost_policy_scheduler_info(exports_schedhost_policy_scheduler_policy_info_t *ret) {
    policy_string_dup(&ret->name, "sstf");
    policy_string_dup(&ret->version, "0.1.0");
    ret->merge_veto = false;
    ret->completions = false;
    ret->weighted_tags = false;
}

void exports_schedhost_policy_scheduler_tunables(exports_schedhost_policy_scheduler_list_tunable_t *ret) {
    exports_schedhost_policy_scheduler_tunable_t *t = grow(NULL, 1, sizeof *t);
    policy_string_dup(&t->name, TUNABLE);
    t->default_ = WAIT_DEFAULT;
    t->min = WAIT_MIN;
    t->max = WAIT_MAX;
    policy_string_dup(&t->unit, "ms");
    policy_string_dup(&t->help, "a request waiting this long goes before nearer ones");
    ret->ptr = t;
    ret->len = 1;
}

bool exports_schedhost_policy_scheduler_init(exports_schedhost_policy_scheduler_setup_t *setup,
                                             policy_list_tuple2_string_s64_t *settings,
                                             policy_string_t *err) {
    (void)setup;
    bool ok = true;
    for (size_t i = 0; ok && i < settings->len; i++)
        ok = check(&settings->ptr[i].f0, settings->ptr[i].f1, err);
    if (ok) {
        s.max_wait_ms = WAIT_DEFAULT;
        for (size_t i = 0; i < settings->len; i++) s.max_wait_ms = settings->ptr[i].f1;
    }
    policy_list_tuple2_string_s64_free(settings);
    return ok;
}

bool exports_schedhost_policy_scheduler_get(policy_string_t *name, int64_t *ret) {
    bool known = name_is(name, TUNABLE);
    policy_string_free(name);
    if (known) *ret = s.max_wait_ms;
    return known;
}

bool exports_schedhost_policy_scheduler_set(policy_string_t *name, int64_t value, policy_string_t *err) {
    bool ok = check(name, value, err);
    if (ok) s.max_wait_ms = value;
    policy_string_free(name);
    return ok;
}

void exports_schedhost_policy_scheduler_insert(uint64_t now_ns, policy_list_u64_t *requests) {
    (void)now_ns;
    for (size_t i = 0; i + WORDS <= requests->len; i += WORDS) enqueue(&requests->ptr[i]);
    policy_list_u64_free(requests);
}

// Requests a busy device sent back: held again, as new ones (SSTF picks by position).
void exports_schedhost_policy_scheduler_requeue(uint64_t now_ns, policy_list_u64_t *requests) {
    exports_schedhost_policy_scheduler_insert(now_ns, requests);
}

// The groups sharing the device: SSTF serves by position alone, so it keeps none of them.
void exports_schedhost_policy_scheduler_groups(uint64_t now_ns, policy_list_u64_t *groups) {
    (void)now_ns;
    policy_list_u64_free(groups);
}

void exports_schedhost_policy_scheduler_dispatch(uint64_t now_ns, uint32_t hw_queue, uint32_t budget,
                                                 answer_t *ret) {
    (void)hw_queue;
    ret->ids = pick(now_ns, budget);
    ret->wake_at_ns.is_some = false;
}

void exports_schedhost_policy_scheduler_insert_and_dispatch(uint64_t now_ns, policy_list_u64_t *requests,
                                                            uint32_t hw_queue, uint32_t budget,
                                                            answer_t *ret) {
    exports_schedhost_policy_scheduler_insert(now_ns, requests);
    exports_schedhost_policy_scheduler_dispatch(now_ns, hw_queue, budget, ret);
}

// info says merge_veto = false, so the host neither asks this nor allow_merge; were it
// asked, 0 allows every merge without asking.
uint32_t exports_schedhost_policy_scheduler_merge_rules(void) {
    return 0;
}

bool exports_schedhost_policy_scheduler_allow_merge(exports_schedhost_policy_scheduler_merge_query_t *query) {
    (void)query;
    return true;
}

// Queued request `target` now covers `sector` + `sectors`; `absorbed`, if set, is gone.
static void merge_one(uint64_t target, uint64_t sector, uint32_t sectors, bool absorbed, uint64_t absorbed_id) {
    // An absorbed request no longer exists and must never be dispatched.
    if (absorbed) {
        size_t gone = find(absorbed_id);
        if (gone != SIZE_MAX) remove_at(gone);
    }
    size_t grown = find(target);
    if (grown != SIZE_MAX) {
        s.queue[grown].sector = sector;
        s.queue[grown].sectors = sectors;
    }
}

void exports_schedhost_policy_scheduler_merged(uint64_t now_ns,
                                               exports_schedhost_policy_scheduler_list_merge_event_t *events) {
    (void)now_ns;
    for (size_t i = 0; i < events->len; i++) {
        const exports_schedhost_policy_scheduler_merge_event_t *e = &events->ptr[i];
        merge_one(e->target, e->sector, e->sectors, e->absorbed.is_some, e->absorbed.val);
    }
    exports_schedhost_policy_scheduler_list_merge_event_free(events);
}

void exports_schedhost_policy_scheduler_completed(uint64_t now_ns, policy_list_u64_t *done) {
    // info says completions = false, so the host does not call this.
    (void)now_ns;
    policy_list_u64_free(done);
}

uint32_t exports_schedhost_policy_scheduler_limit_depth(exports_schedhost_policy_scheduler_op_t op, bool sync) {
    (void)op;
    (void)sync;
    return UINT32_MAX;
}

// One driver turn in scalars: an optional request, then an optional dispatch. Returns the
// result's first word.
static uint64_t turn(uint64_t now_ns, uint64_t control, const uint64_t request[WORDS]) {
    if (control & TURN_REQUEST) enqueue(request);
    if (!(control & TURN_DISPATCH)) return TURN_NONE;
    uint32_t budget = (uint32_t)(control >> 32);
    size_t n = budget < s.len ? budget : s.len;
    if (n == 0) return TURN_NONE;
    if (n == 1) return take_next(now_ns);
    if (n > s.kept_cap) {
        s.kept = grow(s.kept, n, sizeof *s.kept);
        s.kept_cap = n;
    }
    for (size_t i = 0; i < n; i++) s.kept[i] = take_next(now_ns);
    s.kept_len = n;
    return TURN_MORE;
}

void exports_schedhost_policy_scheduler_turn(uint64_t now_ns, uint64_t control, uint64_t r0, uint64_t r1,
                                             uint64_t r2, uint64_t r3, uint64_t r4, policy_tuple2_u64_u64_t *ret) {
    const uint64_t request[WORDS] = {r0, r1, r2, r3, r4};
    ret->f0 = turn(now_ns, control, request);
    ret->f1 = TURN_NO_WAKE;
}

void exports_schedhost_policy_scheduler_turn_after_completion(uint64_t now_ns, uint64_t control, uint64_t c0,
                                                              uint64_t c1, uint64_t c2, uint64_t c3, uint64_t c4,
                                                              uint64_t r0, uint64_t r1, uint64_t r2, uint64_t r3,
                                                              uint64_t r4, policy_tuple2_u64_u64_t *ret) {
    // The completion (c0..c4) means nothing to sstf.
    (void)c0, (void)c1, (void)c2, (void)c3, (void)c4;
    const uint64_t request[WORDS] = {r0, r1, r2, r3, r4};
    ret->f0 = turn(now_ns, control, request);
    ret->f1 = TURN_NO_WAKE;
}

// A turn of any size, packed in one list: completions (five words each, meaning nothing
// to sstf), merge events (four words each), then requests (five words each).
void exports_schedhost_policy_scheduler_turn_words(uint64_t now_ns, uint64_t control, uint32_t completions,
                                                   uint32_t merges, uint32_t requests, policy_list_u64_t *words,
                                                   policy_tuple2_u64_u64_t *ret) {
    uint64_t need = (uint64_t)completions * WORDS + (uint64_t)merges * MERGE_WORDS + (uint64_t)requests * WORDS;
    // The host never sends a list its counts do not describe: trap rather than misread it.
    if (need != words->len) abort();
    const uint64_t *w = words->ptr + (size_t)completions * WORDS;
    for (uint32_t i = 0; i < merges; i++, w += MERGE_WORDS)
        merge_one(w[0], w[1], (uint32_t)w[2], w[3] != UINT64_MAX, w[3]);
    for (uint32_t i = 0; i < requests; i++, w += WORDS) enqueue(w);
    policy_list_u64_free(words);
    ret->f0 = turn(now_ns, control & ~(uint64_t)TURN_REQUEST, NULL);
    ret->f1 = TURN_NO_WAKE;
}

void exports_schedhost_policy_scheduler_take_answer(answer_t *ret) {
    ret->ids.ptr = grow(NULL, s.kept_len, sizeof(uint64_t));
    ret->ids.len = s.kept_len;
    if (s.kept_len) memcpy(ret->ids.ptr, s.kept, s.kept_len * sizeof(uint64_t));
    s.kept_len = 0;
    ret->wake_at_ns.is_some = false;
}

void exports_schedhost_policy_scheduler_save_state(policy_list_u8_t *ret) {
    // Nothing worth handing over: the host re-inserts whatever is queued.
    ret->ptr = NULL;
    ret->len = 0;
}

bool exports_schedhost_policy_scheduler_restore_state(policy_list_u8_t *state, policy_string_t *err) {
    bool empty = state->len == 0;
    policy_list_u8_free(state);
    if (!empty) policy_string_dup(err, "sstf keeps no state but was given some");
    return empty;
}
