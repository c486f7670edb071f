/**
 * A software or fallback adapter runs WebGPU on the CPU: Chromium's SwiftShader, Mesa's llvmpipe,
 * WARP. The spec's flag says so where the browser sets it; the adapter's names say so elsewhere.
 */
export function isSoftwareAdapter(adapter: GPUAdapter): boolean {
  const info = adapter.info as (GPUAdapterInfo & { isFallbackAdapter?: boolean }) | undefined;
  if (info?.isFallbackAdapter || (adapter as { isFallbackAdapter?: boolean }).isFallbackAdapter) return true;
  const names = `${info?.vendor ?? ""} ${info?.architecture ?? ""} ${info?.device ?? ""} ${info?.description ?? ""}`;
  return /swiftshader|llvmpipe|lavapipe|softpipe|microsoft basic render|\bwarp\b/i.test(names);
}
