/* The tree's arithmetic (tree_plan.h): pure functions, no fabric, no
 * state; collnet_tree.c runs the tree by them. */
#include "tree_plan.h"

void tree_shape_of(uint32_t n, uint32_t F, struct tree_shape *s)
{
	s->n = n;
	s->G = (n + F - 1) / F;
	s->Fp = (n + s->G - 1) / s->G;
}

uint64_t tree_rank_slots(const struct tree_shape *s)
{
	return 2ull * s->n + (uint64_t)s->Fp * s->G;
}

struct grant tree_inner_ask(const struct tree_shape *s, uint32_t nranks, uint32_t window,
			    uint32_t chunk)
{
	uint64_t slots = tree_rank_slots(s);
	uint64_t cap = slots ? GRANT_INFLIGHT_DEFAULT * nranks / slots : GRANT_INFLIGHT_DEFAULT;

	return grant_inflight(window, chunk, nranks, cap, GRANT_MIN_CHUNK_DEFAULT, 0);
}

uint32_t tree_grp_size(const struct tree_shape *s, uint32_t k)
{
	return s->n / s->G + (k < s->n % s->G);
}

uint32_t tree_grp_start(const struct tree_shape *s, uint32_t k)
{
	uint32_t x = s->n % s->G;

	return k * (s->n / s->G) + (k < x ? k : x);
}

uint32_t tree_grp_of(const struct tree_shape *s, uint32_t rank)
{
	uint32_t k = 0;

	while (k + 1 < s->G && tree_grp_start(s, k + 1) <= rank)
		k++;
	return k;
}

uint32_t tree_owner(const struct tree_shape *s, uint32_t k, uint32_t shard)
{
	return tree_grp_start(s, k) + shard % tree_grp_size(s, k);
}

uint32_t tree_cross_slot(const struct tree_shape *s, uint32_t k, uint32_t shard)
{
	return TREE_X0 + shard / tree_grp_size(s, k);
}

void tree_place_of(const struct tree_shape *s, uint32_t rank, struct tree_place *p)
{
	p->group = tree_grp_of(s, rank);
	p->start = tree_grp_start(s, p->group);
	p->g = tree_grp_size(s, p->group);
	p->member = rank - p->start;
	p->ninner = TREE_X0;
	p->shard[TREE_RS] = p->shard[TREE_AG] = 0;
	for (uint32_t sh = p->member; sh < s->Fp && p->ninner < TREE_INNER_MAX; sh += p->g)
		p->shard[p->ninner++] = sh;
}

/* A distinct, deterministic job id per (kind, index): splitmix64's
 * finaliser over the tree's id with them mixed in. */
static uint64_t inner_job(uint64_t job, uint32_t kind, uint32_t idx)
{
	uint64_t z = job ^ ((uint64_t)(kind + 1) << 56) ^ ((uint64_t)idx << 24);

	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void tree_inner_of(const struct tree_shape *s, const struct tree_place *p, uint64_t job,
		   uint32_t slot, struct tree_inner *out)
{
	if (slot < TREE_X0) {
		out->job_id = inner_job(job, slot, p->group);
		out->rank = p->member;
		out->nranks = p->g;
		out->next = p->start + (p->member + 1) % p->g;
		out->prev = p->start + (p->member + p->g - 1) % p->g;
		out->next_slot = out->prev_slot = slot;
		return;
	}
	uint32_t sh = p->shard[slot], kn = (p->group + 1) % s->G, kp = (p->group + s->G - 1) % s->G;
	out->job_id = inner_job(job, 2, sh);
	out->rank = p->group;
	out->nranks = s->G;
	out->next = tree_owner(s, kn, sh);
	out->next_slot = tree_cross_slot(s, kn, sh);
	out->prev = tree_owner(s, kp, sh);
	out->prev_slot = tree_cross_slot(s, kp, sh);
}

static void add(struct tree_stage *st, uint32_t *n, uint8_t comm, uint8_t kind, size_t base,
		size_t len)
{
	st[*n] = (struct tree_stage){ .comm = comm, .kind = kind, .base = base, .len = len };
	(*n)++;
}

uint32_t tree_plan_req(const struct tree_shape *s, const struct tree_place *p, size_t count,
		       size_t es, struct tree_stage st[TREE_STAGES_MAX], size_t *shp)
{
	/* shards of whole 64-byte pieces: a small buffer has fewer of them */
	size_t a = es < 64 ? 64 / es : 1;
	size_t sh = (count + s->Fp - 1) / s->Fp;
	uint32_t n = 0;

	sh = (sh + a - 1) / a * a;
	*shp = sh;
	if (!count)
		return 0;
	size_t main_len = (size_t)p->g * sh < count ? (size_t)p->g * sh : count;
	size_t xlo = (size_t)(s->Fp - 1) * sh;
	int extra = p->g < s->Fp && xlo < count; /* the leftover shard: member 0's */
	for (uint8_t k = TK_RS; k <= TK_AG; k++) {
		if (k == TK_AR) {
			for (uint32_t i = TREE_X0; i < p->ninner; i++) {
				size_t lo = (size_t)p->shard[i] * sh;
				if (lo < count)
					add(st, &n, (uint8_t)i, TK_AR, lo, count - lo < sh ? count - lo : sh);
			}
			continue;
		}
		uint8_t comm = k == TK_RS ? TREE_RS : TREE_AG;
		add(st, &n, comm, k, 0, main_len);
		if (extra)
			add(st, &n, comm, k, xlo, count - xlo);
	}
	return n;
}
