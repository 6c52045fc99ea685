"""(tests/bench/logs/fp8_s_numerics.py; needs numpy and ml_dtypes: `python3 fp8_s_numerics.py SEED`.)
Numerics of S = Q K^T with e4m3 operands (issue 15's untried direction), on the CPU.

Keys as fp8_ds_mla stores them: 512 latent dims in e4m3 with an fp32 scale per 128 (amax / 448),
64 rope dims in bf16. The kernel today: K dequantised to bf16 (e4m3 x scale, rounded), Q bf16,
fp32 sums. The candidate: the latent part on e4m3 MMAs, Q split into two e4m3 parts with a
power-of-two scale per head (hi = e4m3(q / s), lo = e4m3((q - s hi) / s2)), each 128-dim block's
sum scaled by the key's scale in fp32; Hopper's e4m3 MMA accumulator emulated as keeping M
mantissa bits (truncated) after each k = 32 step (the DeepSeek-V3 report: about 14 bits).
Errors of S against float64 with the keys unrounded (e4m3 x scale exactly), per row relative to
the row's largest |S|, and of O = softmax(S * sm) V (V = the dequantised latent) relative to O's
largest value."""
import sys
import numpy as np
import ml_dtypes

E4 = ml_dtypes.float8_e4m3fn
BF = ml_dtypes.bfloat16
rng = np.random.default_rng(int(sys.argv[1]) if len(sys.argv) > 1 else 1)


def e4m3(x):
    return np.clip(x, -448, 448).astype(E4).astype(np.float64)


def bf16(x):
    return np.asarray(x, np.float32).astype(BF).astype(np.float64)


def trunc_bits(x, m):
    """x with m explicit mantissa bits, truncated toward zero."""
    mant, ex = np.frexp(x)
    return np.ldexp(np.trunc(mant * 2.0 ** (m + 1)) / 2.0 ** (m + 1), ex)


def pow2_scale(amax, top):
    return 2.0 ** np.ceil(np.log2(np.maximum(amax, 1e-30) / top))


H, N, LAT, R = 16, 2048, 512, 64
sm = (LAT + R) ** -0.5
res = {}
for trial in range(4):
    q = bf16(rng.standard_normal((H, LAT + R)) * rng.uniform(0.5, 4))
    kl = rng.standard_normal((N, LAT)) * rng.uniform(0.2, 3)
    kr = bf16(rng.standard_normal((N, R)))
    sc = np.abs(kl.reshape(N, 4, 128)).max(2) / 448.0                       # fp32 scale per 128
    k8 = e4m3(kl / np.repeat(sc, 128, 1))
    kexact = k8 * np.repeat(sc, 128, 1)                                      # e4m3 x scale, unrounded
    s_true = q[:, :LAT] @ kexact.T + q[:, LAT:] @ kr.T
    # today: K rounded to bf16, fp32 sums (float64 here: the sums' own rounding is far smaller)
    s_bf = q[:, :LAT] @ bf16(kexact).T + q[:, LAT:] @ kr.T
    # candidate: Q in two e4m3 parts, power-of-two scales per head
    qa = q[:, :LAT]
    s1 = pow2_scale(np.abs(qa).max(1, keepdims=True), 448.0)
    hi = e4m3(qa / s1)
    r1 = qa - s1 * hi
    s2 = pow2_scale(np.abs(r1).max(1, keepdims=True), 448.0)
    lo = e4m3(r1 / s2)

    def mma_e4m3(a, b, mbits):
        """sum over each 128-dim block of a . b^T as 4 k = 32 steps, accumulator truncated to mbits"""
        out = np.zeros((a.shape[0], b.shape[0], 4))
        for blk in range(4):
            acc = np.zeros((a.shape[0], b.shape[0]))
            for st in range(4):
                d = slice(128 * blk + 32 * st, 128 * blk + 32 * st + 32)
                acc = acc + a[:, d] @ b[:, d].T
                if mbits:
                    acc = trunc_bits(acc, mbits)
            out[:, :, blk] = acc
        return out

    for name, mbits, parts in [("e4m3 Q hi only, exact acc", 0, 1), ("e4m3 Q hi+lo, exact acc", 0, 2),
                               ("e4m3 Q hi+lo, 13-bit acc", 13, 2), ("e4m3 Q hi+lo, 10-bit acc", 10, 2)]:
        blocks = s1[:, :, None] * mma_e4m3(hi, k8, mbits)
        if parts == 2:
            blocks = blocks + s2[:, :, None] * mma_e4m3(lo, k8, mbits)
        s_c = (blocks * sc[None, :, :]).sum(2) + q[:, LAT:] @ kr.T
        res.setdefault(name, []).append(s_c)
    res.setdefault("bf16 keys (today)", []).append(s_bf)
    res.setdefault("_true", []).append(s_true)
    res.setdefault("_v", []).append(bf16(kexact))


def softmax_o(s, v):
    p = np.exp((s - s.max(1, keepdims=True)) * sm)
    return (p / p.sum(1, keepdims=True)) @ v


print(f"{'S computed as':32s} {'max |dS| / max|S|':>18s} {'max |dO| / max|O|':>18s}")
for name in [k for k in res if not k.startswith("_")]:
    es, eo = [], []
    for s_c, s_t, v in zip(res[name], res["_true"], res["_v"]):
        es.append((np.abs(s_c - s_t).max(1) / np.abs(s_t).max(1)).max())
        o_t = softmax_o(s_t, v)
        eo.append(np.abs(softmax_o(s_c, v) - o_t).max() / np.abs(o_t).max())
    print(f"{name:32s} {max(es):18.2e} {max(eo):18.2e}")
