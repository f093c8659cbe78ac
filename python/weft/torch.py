"""A weft kernel as a differentiable torch operation.

    f = weft.torch.kernel_function(rt, "k", num_outputs=1)
    y = f(x, w, 0.5)          # tensors and numbers: the kernel's inputs
    y.sum().backward()        # x.grad, w.grad from the kernel's weft adjoint

The conventions are Warp's (and rt.jax_kernel's): the kernel's parameters
are its inputs followed by its num_outputs outputs. Each output is a new
zero tensor shaped like the first tensor input (or output_shapes[i]) with
its dtype (or output_dtypes[i]); the launch runs over launch_dims (default:
that shape). Backward launches the kernel's adjoint on the saved inputs
and outputs, seeded with the outputs' gradients; inputs that are numbers
get no gradient (as in Warp).
"""
import torch as _torch

from . import _core

_LUA = """
__weft_python_torch = {
  -- weft.launch(k, dim, inputs, { adjoint = true, ... }) with flat arguments:
  -- name, the dims (nd of them), nin, nout, inputs, outputs, adj_inputs,
  -- adj_outputs (false where a parameter has no gradient).
  adjoint = function(name, nd, ...)
    local k = _G
    for part in name:gmatch("[^.]+") do k = k[part] end
    local a = { ... }
    local dim = {}
    for i = 1, nd do dim[i] = a[i] end
    local nin, nout = a[nd + 1], a[nd + 2]
    local ins, outs, ai, ao, p = {}, {}, {}, {}, nd + 2
    for i = 1, nin do ins[i] = a[p + i] end
    for i = 1, nout do outs[i] = a[p + nin + i] end
    for i = 1, nin do ai[i] = a[p + nin + nout + i] end
    for i = 1, nout do ao[i] = a[p + 2 * nin + nout + i] end
    weft.launch(k, nd == 1 and dim[1] or dim, ins,
                { adjoint = true, outputs = outs, adj_inputs = ai, adj_outputs = ao })
  end,
}
"""


def _dims(d):
    return (int(d),) if isinstance(d, int) else tuple(int(x) for x in d)


def kernel_function(rt, name, num_outputs=1, launch_dims=None, output_shapes=None,
                    output_dtypes=None):
    """A function f(*inputs) -> output tensor (or a tuple when num_outputs
    > 1) running the Lua kernel at global path `name` of Runtime rt, with a
    backward pass through weft's adjoint of that kernel."""
    if not isinstance(name, str):
        raise TypeError("weft.torch.kernel_function: name must be a str, got %s"
                        % type(name).__name__)
    if num_outputs < 1:
        raise ValueError("weft.torch.kernel_function: num_outputs must be at least 1")
    if not getattr(rt, "_torch_lua", False):
        rt.exec(_LUA, "=weft/torch.py")
        rt._torch_lua = True

    def outputs_for(inputs):
        first = next((x for x in inputs if isinstance(x, _torch.Tensor)), None)
        if first is None and (output_shapes is None or output_dtypes is None):
            raise TypeError("weft.torch.kernel_function(%r): no tensor input to shape the "
                            "outputs by (give output_shapes and output_dtypes)" % name)
        outs = []
        for i in range(num_outputs):
            shape = output_shapes[i] if output_shapes is not None else first.shape
            dtype = output_dtypes[i] if output_dtypes is not None else first.dtype
            dev = first.device if first is not None else "cpu"
            outs.append(_torch.zeros(_dims(shape), dtype=dtype, device=dev))
        return outs

    class _Op(_torch.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            ins = [x.detach().contiguous() if isinstance(x, _torch.Tensor) else x
                   for x in inputs]
            outs = outputs_for(ins)
            dim = _dims(launch_dims if launch_dims is not None else outs[0].shape)
            rt.launch(name, dim, inputs=ins, outputs=outs)
            ctx.ins, ctx.dim = ins, dim
            ctx.save_for_backward(*outs)
            return tuple(outs) if num_outputs > 1 else outs[0]

        @staticmethod
        def backward(ctx, *grad_outs):
            outs = list(ctx.saved_tensors)
            ins = ctx.ins
            adj_in = [_torch.zeros_like(x) if isinstance(x, _torch.Tensor) and
                      x.dtype.is_floating_point else False for x in ins]
            # the adjoint may clear the seeds it consumed: give it copies
            adj_out = [g.detach().contiguous().clone() if g is not None else
                       _torch.zeros_like(o) for g, o in zip(grad_outs, outs)]
            args = [name, len(ctx.dim)] + list(ctx.dim) + [len(ins), len(outs)]
            args += ins + outs + adj_in + adj_out
            try:
                rt.call("__weft_python_torch.adjoint", *args, nresults=0)
            except _core.WeftError as e:
                raise RuntimeError("weft.torch.kernel_function(%r) backward: %s" % (name, e)) \
                    from None
            return tuple(g if g is not False else None for g in adj_in)

    def f(*inputs):
        return _Op.apply(*inputs)

    f.__name__ = name.replace(".", "_")
    f.__doc__ = "The weft kernel %r as a differentiable torch function." % name
    return f
