"""paddle_adam.py: fit a line with paddle.optimizer.Adam, gradients from a
weft kernel.

The loss is computed by a Lua kernel on Paddle tensors shared without
copies; the tape's backward pass writes straight into the Paddle
parameter's gradient (weft.from_paddle maps a.grad to p.grad).

    WEFT_LIB=build/libweft.so build/venv/bin/python examples/paddle_adam.py
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import paddle  # noqa: E402

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

paddle.seed(0)
xs = paddle.linspace(-1, 1, 256, dtype="float32")
ys = 3.0 * xs - 0.5 + 0.01 * paddle.randn([256])
p = paddle.create_parameter([2], "float32", default_initializer=paddle.nn.initializer.Constant(0.0))
loss = paddle.zeros([1])
opt = paddle.optimizer.Adam(learning_rate=0.05, parameters=[p])

wp_, wx, wy, wl = (weft.from_paddle(t, runtime=rt) for t in (p, xs, ys, loss))
for step in range(400):
    opt.clear_grad()  # zeros p.grad in place: weft writes into it
    rt.call("grad", wp_, wx, wy, wl, nresults=0)
    opt.step()

a, b = p.numpy().tolist()
print(f"fit: y = {a:.3f} x + {b:.3f} (true: 3 x - 0.5), loss {float(loss.numpy()[0]):.4f}")
ok = abs(a - 3.0) < 0.05 and abs(b + 0.5) < 0.05
print("paddle_adam: ok" if ok else "paddle_adam: NOT CONVERGED")
sys.exit(0 if ok else 1)
