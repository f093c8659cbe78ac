return weft.kernel{ x = weft.array(weft.float64), function(x)
  local i = weft.tid()
  x[i] = 32.0
  x[i] = (x[i] < 1.0) and weft.abs(x[i]) or 2.0
end }
