-- GLM-5.2 at TP 2 x DCP 1 with the nvfp4_ds_mla cache: the DCP = 1 side of `dsa-demo --bench`'s
-- comparison with glm5.2_tp2_dcp2_i1_nvfp4_ds_mla (the same heads per GPU, the whole cache on each
-- GPU). Not rendered by the build (only specs/*.lua are), so libdsa does not link it:
-- `build/dsagen specs/models/bench_*.lua -o .bench-out` renders it into the ignored folder
-- .bench-out/, read at run time with `dsa-demo --bench --dir`.
return {
  model = "glm5.2",
  geometry = import("glm5.2.lua"),
  configs = { { tp = 2, dcp = 1, interleave = 1, cache_dtype = "nvfp4_ds_mla", targets = { "sm_90a" } } },
}
