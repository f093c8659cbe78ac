-- weft.info(): versions and host facts (what `weft info` prints).
return function(weft)
  function weft.info()
    local h = weft._core.host_info()
    local driver = "not found (libcuda.so.1 cannot be loaded)"
    if weft.is_cuda_available then
      driver = weft.is_cuda_available() and "available" or driver
    elseif h.cuda_driver_lib then
      driver = "libcuda.so.1 found"
    end
    return {
      weft = weft.version,
      luajit = jit and jit.version or _VERSION,
      llvm = h.llvm,
      cpu = h.cpu,
      features = h.features,
      vector = h.vector,
      threads = tonumber(weft._C.wf_rt_num_threads(weft._rt)),
      cuda_toolkit = h.cuda_toolkit,
      cuda_driver = driver,
    }
  end
end
