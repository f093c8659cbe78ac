"""torch_adam.py: fit a line with torch.optim.Adam, gradients from a weft kernel.

The loss is computed by a Lua kernel on tensors shared without copies; the
tape's backward pass writes straight into the torch parameter's .grad.

    WEFT_LIB=build/libweft.so build/venv/bin/python examples/torch_adam.py
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import torch  # noqa: E402

import weft  # noqa: E402

rt = weft.Runtime()
rt.exec("""
  -- squared error of the line y = p[0] * x + p[1] over the samples
  loss_k = weft.kernel{
    p = weft.array(weft.float32), xs = weft.array(weft.float32),
    ys = weft.array(weft.float32), l = weft.array(weft.float32),
    function(p, xs, ys, l)
      local i = weft.tid()
      local r = p[0] * xs[i] + p[1] - ys[i]
      weft.atomic_add(l, 0, r * r)
    end }

  function grad(p, xs, ys, l)
    l:zero_()
    local tape = weft.Tape()
    tape:record(function() weft.launch(loss_k, #xs, { p, xs, ys }, { outputs = { l } }) end)
    tape:backward(l)
  end
""")

torch.manual_seed(0)
xs = torch.linspace(-1, 1, 256)
ys = 3.0 * xs - 0.5 + 0.01 * torch.randn(256)
p = torch.zeros(2, requires_grad=True)
loss = torch.zeros(1, requires_grad=True)
opt = torch.optim.Adam([p], lr=0.05)

wp_, wx, wy, wl = (weft.from_torch(t, runtime=rt) for t in (p, xs, ys, loss))
for step in range(400):
    opt.zero_grad(set_to_none=False)  # keep .grad: weft writes into it
    rt.call("grad", wp_, wx, wy, wl, nresults=0)
    opt.step()

a, b = p.tolist()
print(f"fit: y = {a:.3f} x + {b:.3f} (true: 3 x - 0.5), loss {loss.item():.4f}")
ok = abs(a - 3.0) < 0.05 and abs(b + 0.5) < 0.05
print("torch_adam: ok" if ok else "torch_adam: NOT CONVERGED")
sys.exit(0 if ok else 1)
