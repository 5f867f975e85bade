/* The llama.cpp side of `brigade bench engine --peer llamacpp`.
 *
 * brigade compiles this file with gcc at bench time, against the prebuilt llama.cpp libraries of
 * the npm package @node-llama-cpp/linux-x64 and the headers of the same release, then runs it as a
 * child process. It loads the GGUF model once and answers one command per line on stdin with one
 * line on stdout, so brigade can interleave its own measurements with llama.cpp's in one run while
 * both sides keep their weights warm:
 *
 *   greedy N ID ID ...   ->  tokens T1 ... TN        (argmax decoding after the prompt ID ID ...)
 *   prefill N TRIALS     ->  prefill SECONDS         (best of TRIALS single N-token steps)
 *   decode B STEPS P     ->  decode SECONDS          (STEPS steps of B sequences, P-token prompts)
 *   quit
 *
 * Prompts follow brigade's benchmark: token i of prompt `seed` is (seed*7919 + i*104729) % vocab.
 * Any failure answers `error MESSAGE`.
 *
 * Arguments: --model FILE.gguf --lib-dir DIR [--cpu-lib FILE.so] [--threads N]
 *   --lib-dir holds libllama, libggml and the libggml-cpu-<variant>.so builds; llama.cpp loads the
 *   variant that suits this CPU best. --cpu-lib loads that one variant instead (e.g. haswell, the
 *   AVX2 build).
 */
#define _GNU_SOURCE
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "llama.h"

enum { max_line_bytes = 1 << 16, max_prompt_tokens = 8192 };

typedef ggml_threadpool_t (*pool_new_fn)(struct ggml_threadpool_params*);
typedef void (*pool_fn)(ggml_threadpool_t);

struct peer {
  struct llama_model* model;
  int vocab;
  int threads;
  /* One persistent thread pool for every context, as llama.cpp's own tools attach: without it
   * ggml starts and joins its threads on every graph, which dominates a small decode step. */
  ggml_threadpool_t pool;
  pool_fn pause_pool;
  char variant[64];
};

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int argmax_row(const float* row, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i) {
    if (row[i] > row[best]) best = i;
  }
  return best;
}

static llama_token prompt_token(int seed, int i, int vocab) {
  return (llama_token)(((int64_t)seed * 7919 + (int64_t)i * 104729) % vocab);
}

static void only_warnings(enum ggml_log_level level, const char* text, void* user) {
  (void)user;
  if (level == GGML_LOG_LEVEL_WARN || level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

/* Names the libggml-cpu-<variant>.so that the process has loaded. */
static int find_variant(struct dl_phdr_info* info, size_t size, void* out) {
  (void)size;
  const char* hit = info->dlpi_name ? strstr(info->dlpi_name, "libggml-cpu-") : NULL;
  if (!hit) return 0;
  hit += strlen("libggml-cpu-");
  size_t n = strcspn(hit, ".");
  if (n >= 64) n = 63;
  memcpy(out, hit, n);
  ((char*)out)[n] = '\0';
  return 1;
}

static void batch_add(struct llama_batch* b, llama_token token, llama_pos pos, llama_seq_id seq,
                      int wants_logits) {
  const int k = b->n_tokens++;
  b->token[k] = token;
  b->pos[k] = pos;
  b->n_seq_id[k] = 1;
  b->seq_id[k][0] = seq;
  b->logits[k] = (int8_t)wants_logits;
}

static struct llama_context* open_context(struct peer* p, int sequences, int tokens_each) {
  struct llama_context_params cp = llama_context_default_params();
  /* llama.cpp pads a sequence's cells to a multiple of 256 itself, and warns when the total is
   * not a multiple of the sequence count. */
  tokens_each = (tokens_each + 255) / 256 * 256;
  cp.n_ctx = (uint32_t)(sequences * tokens_each);
  cp.n_batch = 512;
  cp.n_ubatch = 512;
  cp.n_seq_max = (uint32_t)sequences;
  cp.n_threads = p->threads;
  cp.n_threads_batch = p->threads;
  struct llama_context* ctx = llama_init_from_model(p->model, cp);
  if (ctx && p->pool) llama_attach_threadpool(ctx, p->pool, p->pool);
  return ctx;
}

static void close_context(struct peer* p, struct llama_context* ctx) {
  llama_free(ctx);
  /* Idle workers must not spin while brigade measures its own side. */
  if (p->pool && p->pause_pool) p->pause_pool(p->pool);
}

static int greedy(struct peer* p, char* args) {
  int new_tokens = (int)strtol(args, &args, 10);
  static llama_token prompt[max_prompt_tokens];
  int n = 0;
  for (char* end = args; n < max_prompt_tokens; args = end) {
    long v = strtol(args, &end, 10);
    if (end == args) break;
    prompt[n++] = (llama_token)v;
  }
  if (n == 0 || new_tokens < 1) return printf("error greedy needs N and a prompt\n"), 1;
  struct llama_context* ctx = open_context(p, 1, n + new_tokens + 16);
  if (!ctx) return printf("error cannot create a context\n"), 1;
  struct llama_batch b = llama_batch_init(n, 0, 1);
  int rc = 0;
  printf("tokens");
  for (int step = 0; step < new_tokens && rc == 0; ++step) {
    b.n_tokens = 0;
    if (step == 0) {
      for (int i = 0; i < n; ++i)
        batch_add(&b, prompt[i], i, 0, i == n - 1);
    } else {
      batch_add(&b, prompt[n - 1], n - 1, 0, 1);
    }
    rc = llama_decode(ctx, b);
    if (rc != 0) break;
    const llama_token next = argmax_row(llama_get_logits_ith(ctx, -1), p->vocab);
    printf(" %d", next);
    if (n == max_prompt_tokens) break;
    prompt[n++] = next; /* the next step feeds it at position n - 1 */
  }
  printf(rc ? "\nerror llama_decode returned %d\n" : "\n", rc);
  llama_batch_free(b);
  close_context(p, ctx);
  return rc;
}

/* One prompt of `tokens` tokens in a single step, until its first token is chosen. */
static int prefill(struct peer* p, char* args) {
  const int tokens = (int)strtol(args, &args, 10);
  const int trials = (int)strtol(args, &args, 10);
  if (tokens < 1 || tokens > 512 || trials < 1) return printf("error prefill N TRIALS\n"), 1;
  struct llama_context* ctx = open_context(p, 1, tokens + 16);
  if (!ctx) return printf("error cannot create a context\n"), 1;
  struct llama_batch b = llama_batch_init(tokens, 0, 1);
  double best_s = 1e30;
  int rc = 0;
  /* Trial -1 warms up: it pages in the mapped weights and sizes the compute buffers. */
  for (int trial = -1; trial < trials && rc == 0; ++trial) {
    llama_memory_clear(llama_get_memory(ctx), 1);
    b.n_tokens = 0;
    for (int i = 0; i < tokens; ++i)
      batch_add(&b, prompt_token(trial < 0 ? 97 : trial, i, p->vocab), i, 0, i == tokens - 1);
    const double start_s = now_s();
    rc = llama_decode(ctx, b);
    if (rc == 0) (void)argmax_row(llama_get_logits_ith(ctx, -1), p->vocab);
    const double took_s = now_s() - start_s;
    if (trial >= 0 && took_s < best_s) best_s = took_s;
  }
  if (rc)
    printf("error llama_decode returned %d\n", rc);
  else
    printf("prefill %.9f\n", best_s);
  llama_batch_free(b);
  close_context(p, ctx);
  return rc;
}

/* Prefills `batch` prompts, then decodes `steps` steps with one token per sequence each; returns
 * the seconds of the decode steps only, or a negative value when llama_decode fails. */
static double run_decode(struct peer* p, struct llama_context* ctx, struct llama_batch* b,
                         int batch, int steps, int prompt_tokens) {
  static llama_token last[512];
  llama_memory_clear(llama_get_memory(ctx), 1);
  b->n_tokens = 0;
  for (int s = 0; s < batch; ++s) {
    for (int i = 0; i < prompt_tokens; ++i)
      batch_add(b, prompt_token(s, i, p->vocab), i, s, i == prompt_tokens - 1);
  }
  if (llama_decode(ctx, *b) != 0) return -1;
  for (int s = 0; s < batch; ++s)
    last[s] = argmax_row(llama_get_logits_ith(ctx, (s + 1) * prompt_tokens - 1), p->vocab);
  const double start_s = now_s();
  for (int step = 0; step < steps; ++step) {
    b->n_tokens = 0;
    for (int s = 0; s < batch; ++s)
      batch_add(b, last[s], prompt_tokens + step, s, 1);
    if (llama_decode(ctx, *b) != 0) return -1;
    for (int s = 0; s < batch; ++s)
      last[s] = argmax_row(llama_get_logits_ith(ctx, s), p->vocab);
  }
  return now_s() - start_s;
}

static int decode(struct peer* p, char* args) {
  const int batch = (int)strtol(args, &args, 10);
  const int steps = (int)strtol(args, &args, 10);
  const int prompt_tokens = (int)strtol(args, &args, 10);
  if (batch < 1 || batch > 512 || steps < 1 || prompt_tokens < 1 || batch * prompt_tokens > 512)
    return printf("error decode B STEPS P (B*P <= 512)\n"), 1;
  struct llama_context* ctx = open_context(p, batch, prompt_tokens + steps + 16);
  if (!ctx) return printf("error cannot create a context\n"), 1;
  struct llama_batch b = llama_batch_init(batch * prompt_tokens, 0, 1);
  double took_s = run_decode(p, ctx, &b, batch, 4, prompt_tokens); /* warm-up */
  if (took_s >= 0) took_s = run_decode(p, ctx, &b, batch, steps, prompt_tokens);
  if (took_s < 0)
    printf("error llama_decode failed\n");
  else
    printf("decode %.9f\n", took_s);
  llama_batch_free(b);
  close_context(p, ctx);
  return took_s < 0;
}

static int load(struct peer* p, const char* model_path, const char* lib_dir, const char* cpu_lib) {
  llama_log_set(only_warnings, NULL);
  if (cpu_lib) {
    if (!ggml_backend_load(cpu_lib)) return fprintf(stderr, "cannot load %s\n", cpu_lib), 1;
  } else {
    ggml_backend_load_all_from_path(lib_dir);
  }
  llama_backend_init();
  ggml_backend_reg_t cpu = ggml_backend_reg_by_name("CPU");
  if (!cpu) return fprintf(stderr, "no CPU backend in %s\n", cpu_lib ? cpu_lib : lib_dir), 1;
  strcpy(p->variant, "unknown");
  dl_iterate_phdr(find_variant, p->variant);
  pool_new_fn pool_new = (pool_new_fn)ggml_backend_reg_get_proc_address(cpu, "ggml_threadpool_new");
  p->pause_pool = (pool_fn)ggml_backend_reg_get_proc_address(cpu, "ggml_threadpool_pause");
  if (pool_new) {
    struct ggml_threadpool_params tp = ggml_threadpool_params_default(p->threads);
    p->pool = pool_new(&tp);
  }
  struct llama_model_params mp = llama_model_default_params();
  p->model = llama_model_load_from_file(model_path, mp);
  if (!p->model) return fprintf(stderr, "llama.cpp cannot load %s\n", model_path), 1;
  p->vocab = llama_vocab_n_tokens(llama_model_get_vocab(p->model));
  return 0;
}

int main(int argc, char** argv) {
  const char *model_path = NULL, *lib_dir = NULL, *cpu_lib = NULL;
  struct peer p;
  memset(&p, 0, sizeof p);
  p.threads = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--model"))
      model_path = argv[i + 1];
    else if (!strcmp(argv[i], "--lib-dir"))
      lib_dir = argv[i + 1];
    else if (!strcmp(argv[i], "--cpu-lib"))
      cpu_lib = argv[i + 1];
    else if (!strcmp(argv[i], "--threads"))
      p.threads = atoi(argv[i + 1]);
    else
      return fprintf(stderr, "unknown argument %s\n", argv[i]), 2;
  }
  if (!model_path || (!lib_dir && !cpu_lib) || p.threads < 1) {
    fprintf(stderr, "usage: %s --model F.gguf --lib-dir DIR [--cpu-lib F.so] [--threads N]\n",
            argv[0]);
    return 2;
  }
  if (load(&p, model_path, lib_dir, cpu_lib)) return 1;
  printf("ready vocab %d threads %d variant %s\n", p.vocab, p.threads, p.variant);
  fflush(stdout);
  static char line[max_line_bytes];
  while (fgets(line, sizeof line, stdin)) {
    if (!strncmp(line, "greedy ", 7))
      greedy(&p, line + 7);
    else if (!strncmp(line, "prefill ", 8))
      prefill(&p, line + 8);
    else if (!strncmp(line, "decode ", 7))
      decode(&p, line + 7);
    else if (!strncmp(line, "quit", 4))
      break;
    else
      printf("error unknown command\n");
    fflush(stdout);
  }
  llama_model_free(p.model);
  if (p.pool) {
    pool_fn pool_free = (pool_fn)ggml_backend_reg_get_proc_address(ggml_backend_reg_by_name("CPU"),
                                                                   "ggml_threadpool_free");
    if (pool_free) pool_free(p.pool);
  }
  return 0;
}
