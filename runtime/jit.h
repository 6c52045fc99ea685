/* The JIT: NVRTC compiles each kernel module of a configuration (one thread per module), with a
 * disk cache of cubins; no GPU needed. Loading onto a device is the context's (ctx.c). */
#ifndef DSA_JIT_H
#define DSA_JIT_H

#include "plan.h"

/* The kernel library's headers, embedded by the build (tools/embed --table; the list is the
 * build's), by the names the kernels include them with. */
#define DSA_MAX_HEADERS 63
typedef struct dsa_embedded {
    const char *name, *text;
    const size_t *len;
} dsa_header_t;
extern const dsa_header_t dsa_headers[];
extern const int dsa_headers_count;

/* One entry function of a module as ptxas reported it (compiled, not loaded from the cache). */
#define DSA_JIT_MAX_ENTRIES 16
typedef struct dsa_jit_entry {
    char name[192];
    int registers, stack_bytes, spill_bytes, shared_bytes; /* spill_bytes: spill stores */
    /* ptxas's code (7510 .. 7599) when it serialized the entry's warpgroup MMAs ("Potential
     * Performance Loss: wgmma.mma_async instructions are serialized ..."), else 0 */
    int wgmma_serialized;
} dsa_jit_entry_t;

/* Every entry function of an NVRTC log with ptxas's report ("Compiling entry function '<name>'"),
 * with its registers, shared memory, stack frame, spill stores and serialized warpgroup MMAs, into e
 * (at most DSA_JIT_MAX_ENTRIES); their count. */
DSA_HIDDEN int dsa_jit_parse_entries(const char *log, dsa_jit_entry_t *e);

typedef struct dsa_jit_out {
    char *cubin; /* malloc'd; the caller frees it */
    size_t len;
    dsa_kernel_info_t info; /* the module's first entry (dsa_module_desc_t.entry) */
    int nentries;           /* every entry function ptxas compiled (0 from the cache), up to DSA_JIT_MAX_ENTRIES */
    dsa_jit_entry_t entries[DSA_JIT_MAX_ENTRIES];
} dsa_jit_out_t;

/* 1 when target is an architecture name like sm_90a (sm_ and 1..12 lower-case letters or digits,
 * what a context's target[16] holds), the only targets the JIT takes; 0 otherwise (NULL too). */
DSA_HIDDEN int dsa_target_ok(const char *target);

/* Compiles (or loads from the disk cache) every module of cfg for target; out has DSA_NMODULES
 * entries. cache_dir NULL: $DSA_CACHE_DIR or ~/.cache/dsagen; "": no cache. */
DSA_HIDDEN dsa_result_t dsa_jit_compile(const dsa_cfg_t *cfg, const char *target, const char *cache_dir,
                                        int log_level, dsa_jit_out_t *out, char *err, size_t errlen);

/* How long (ms) a compile waits for another creator's lock on the same cache entry before it
 * compiles anyway, with a warning (jit.c: cache_lock). Tests shorten it. */
DSA_HIDDEN extern double dsa_jit_lock_wait_ms;

#endif
