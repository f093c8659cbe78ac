-- weft.info(): versions and host facts (what `weft info` prints).
return function(weft, P)
  function weft.info()
    local h = P.core.host_info()
    local driver = "not found (libcuda.so.1 cannot be loaded)"
    if weft.is_cuda_available then
      if weft.is_cuda_available() then -- the device name says "emulated" under scripts/cuda-emu
        local ok, d = pcall(weft.cuda_device_info, "cuda:0")
        driver = ok and ("available (cuda:0: %s, %s)"):format(d.name, d.arch) or "available"
      end
    elseif h.cuda_driver_lib then
      driver = "libcuda.so.1 found"
    end
    -- NVRTC (the CUDA compiler, loaded on first use): "13.0", or why not
    local nvrtc = "not found"
    local core = P.core
    if core.cuda_nvrtc_version then
      local v, why = core.cuda_nvrtc_version()
      if v then
        nvrtc = ("%d.%d"):format(math.floor(v / 1000), math.floor(v % 1000 / 10))
      elseif why then
        nvrtc = "not found (" .. tostring(why):gsub("^weft: ", "") .. ")"
      end
    end
    return {
      weft = weft.version,
      luajit = jit and jit.version or _VERSION,
      llvm = h.llvm,
      cpu = h.cpu,
      features = h.features,
      vector = h.vector,
      threads = tonumber(P.C.wf_rt_num_threads(P.rt)),
      cuda_toolkit = h.cuda_toolkit,
      cuda_driver = driver,
      nvrtc = nvrtc,
      cuda_fast_compile = weft.config.cuda_fast_compile,
    }
  end
end
