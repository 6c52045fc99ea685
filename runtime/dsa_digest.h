/* SHA-256 digests as lowercase hex, in one place for dsagen (which writes a plan's source and seal
 * hashes), libdsa's plan check (which compares them) and its JIT cache (which names files by them).
 * Header-only over OpenSSL's libcrypto, which both programs link: dsagen does not link libdsa, and
 * dsa_plan.h, which generated glue includes, must not pull OpenSSL into a host engine's build. */
#ifndef DSA_DIGEST_H
#define DSA_DIGEST_H

#include <openssl/evp.h>
#include <stddef.h>

/* The n bytes at b as 2n lowercase hex digits and a NUL into out[2n + 1]. */
static inline void dsa_hex(const unsigned char *b, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = '\0';
}

/* The SHA-256 of len bytes at data into md[32]: 0, or -1 where libcrypto fails (md then means
 * nothing). */
static inline int dsa_sha256(const void *data, size_t len, unsigned char md[32])
{
    unsigned n = 32;
    return EVP_Digest(data, len, md, &n, EVP_sha256(), NULL) == 1 && n == 32 ? 0 : -1;
}

/* The same as 64 lowercase hex digits into hex[65]: 0, or -1 (hex empty) where libcrypto fails. */
static inline int dsa_sha256_hex(const void *data, size_t len, char hex[65])
{
    unsigned char md[32];
    if (dsa_sha256(data, len, md) != 0) {
        hex[0] = '\0';
        return -1;
    }
    dsa_hex(md, 32, hex);
    return 0;
}

#endif
