-- embed_sim.lua: the kernels of examples/embed.c. The C host owns the
-- particle buffers and runs the frame loop; this script only declares what
-- one step does. `sim` is a global table so the host can name the kernels
-- ("sim.step") in weft_launch.
local weft = require "weft"

sim = {}

-- One explicit Euler step of every particle, in place: gravity (9.81 m/s^2
-- down y), then a bounce off the ground plane y = 0 that keeps 80% of the
-- speed.
sim.step = weft.kernel{
  pos = weft.array(weft.vec3), vel = weft.array(weft.vec3), dt = weft.float32,
  function(pos, vel, dt)
    local i = weft.tid()
    local v = vel[i] + weft.vec3(0.0, -9.81, 0.0) * dt
    local p = pos[i] + v * dt
    if p.y < 0.0 then p.y = -p.y; v.y = -v.y * 0.8 end
    pos[i] = p
    vel[i] = v
  end,
}
