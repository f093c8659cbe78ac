-- spec/helpers/flat.lua: the numbers of a nested Lua table (what a vector,
-- matrix or struct value reads back as), in order, as one flat list.
local function flat(t, out)
  out = out or {}
  if type(t) == "number" then
    out[#out + 1] = t
  else
    for _, v in ipairs(t) do flat(v, out) end
  end
  return out
end
return flat
