-- Runs first (busted sorts spec files by path): installs the collector of
-- compiled kernel modules that spec/zz_ptx_suite_spec.lua checks at the end.
local collect = dofile("spec/helpers/ptx_collect.lua")

describe("ptx suite collector", function()
  it("is installed before the other specs compile kernels", function()
    assert.is_table(collect.list())
    assert.is_function(debug.getregistry()["weft.module_hook"])
  end)
end)
