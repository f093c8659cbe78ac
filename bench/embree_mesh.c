/*
** embree_mesh.c -- the Embree 3 baseline of bench/mesh.lua: build a
** triangle scene over the bench's points and indices, and cast its rays
** with rtcIntersect1 on N threads (pthreads, the rays split in chunks).
** Built as a shared library by scripts/run-bench (or bench/mesh.lua's
** fallback) and loaded through the FFI:
**   void *eb_build(const float *pts, int np, const int *idx, int nt);
**   void eb_cast(void *h, const float *org, const float *dir, int n, float *t, int threads);
**   void eb_free(void *h);
*/
#include <embree3/rtcore.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct eb {
  RTCDevice dev;
  RTCScene scene;
} eb;

void *eb_build(const float *pts, int np, const int *idx, int nt) {
  eb *h = calloc(1, sizeof *h);
  if (!h) return NULL;
  h->dev = rtcNewDevice(NULL);
  h->scene = rtcNewScene(h->dev);
  RTCGeometry g = rtcNewGeometry(h->dev, RTC_GEOMETRY_TYPE_TRIANGLE);
  float *v = rtcSetNewGeometryBuffer(g, RTC_BUFFER_TYPE_VERTEX, 0, RTC_FORMAT_FLOAT3,
                                     3 * sizeof(float), (size_t)np);
  unsigned *t = rtcSetNewGeometryBuffer(g, RTC_BUFFER_TYPE_INDEX, 0, RTC_FORMAT_UINT3,
                                        3 * sizeof(unsigned), (size_t)nt);
  memcpy(v, pts, sizeof(float) * 3 * (size_t)np);
  memcpy(t, idx, sizeof(int) * 3 * (size_t)nt);
  rtcCommitGeometry(g);
  rtcAttachGeometry(h->scene, g);
  rtcReleaseGeometry(g);
  rtcCommitScene(h->scene);
  return h;
}

typedef struct job {
  eb *h;
  const float *org, *dir;
  float *t;
  int begin, end;
} job;

static void *cast_range(void *p) {
  job *j = p;
  struct RTCIntersectContext ctx;
  rtcInitIntersectContext(&ctx);
  for (int i = j->begin; i < j->end; i++) {
    struct RTCRayHit rh;
    rh.ray.org_x = j->org[3 * i], rh.ray.org_y = j->org[3 * i + 1],
    rh.ray.org_z = j->org[3 * i + 2];
    rh.ray.dir_x = j->dir[3 * i], rh.ray.dir_y = j->dir[3 * i + 1],
    rh.ray.dir_z = j->dir[3 * i + 2];
    rh.ray.tnear = 0.0f;
    rh.ray.tfar = 1e6f;
    rh.ray.mask = 0xffffffffu;
    rh.ray.flags = 0;
    rh.ray.time = 0.0f;
    rh.hit.geomID = RTC_INVALID_GEOMETRY_ID;
    rtcIntersect1(j->h->scene, &ctx, &rh);
    j->t[i] = rh.hit.geomID == RTC_INVALID_GEOMETRY_ID ? -1.0f : rh.ray.tfar;
  }
  return NULL;
}

void eb_cast(void *hp, const float *org, const float *dir, int n, float *t, int threads) {
  if (threads < 1) threads = 1;
  if (threads > 64) threads = 64;
  pthread_t th[64];
  job jobs[64];
  for (int k = 0; k < threads; k++) {
    jobs[k] = (job){hp,
                    org,
                    dir,
                    t,
                    (int)((long long)n * k / threads),
                    (int)((long long)n * (k + 1) / threads)};
    if (k > 0) pthread_create(&th[k], NULL, cast_range, &jobs[k]);
  }
  cast_range(&jobs[0]);
  for (int k = 1; k < threads; k++)
    pthread_join(th[k], NULL);
}

void eb_free(void *hp) {
  eb *h = hp;
  if (!h) return;
  rtcReleaseScene(h->scene);
  rtcReleaseDevice(h->dev);
  free(h);
}
