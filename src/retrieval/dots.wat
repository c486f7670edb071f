;; The dot products of one query with every vector of an index, in WebAssembly SIMD: four lanes
;; and four accumulators at a time, over vectors laid out `stride` floats apart (a multiple of
;; 16, padded with zeros). The index's JavaScript side owns the memory and its layout.
(module
  (memory (import "index" "memory") 1)
  ;; out[i] = Σ_d vectors[i·stride + d] · query[d], for every i < count.
  (func (export "dots")
    (param $vectors i32) (param $query i32) (param $count i32) (param $stride i32) (param $out i32)
    (local $end i32) (local $row i32) (local $rowEnd i32) (local $at i32)
    (local $a v128) (local $b v128) (local $c v128) (local $d v128)
    (local.set $row (local.get $vectors))
    (local.set $end (i32.add (local.get $out) (i32.shl (local.get $count) (i32.const 2))))
    (block $done
      (loop $rows
        (br_if $done (i32.ge_u (local.get $out) (local.get $end)))
        (local.set $a (v128.const f32x4 0 0 0 0))
        (local.set $b (v128.const f32x4 0 0 0 0))
        (local.set $c (v128.const f32x4 0 0 0 0))
        (local.set $d (v128.const f32x4 0 0 0 0))
        (local.set $at (local.get $query))
        (local.set $rowEnd (i32.add (local.get $row) (i32.shl (local.get $stride) (i32.const 2))))
        (block $rowDone
          (loop $columns
            (br_if $rowDone (i32.ge_u (local.get $row) (local.get $rowEnd)))
            (local.set $a (f32x4.add (local.get $a)
              (f32x4.mul (v128.load (local.get $row)) (v128.load (local.get $at)))))
            (local.set $b (f32x4.add (local.get $b)
              (f32x4.mul (v128.load offset=16 (local.get $row)) (v128.load offset=16 (local.get $at)))))
            (local.set $c (f32x4.add (local.get $c)
              (f32x4.mul (v128.load offset=32 (local.get $row)) (v128.load offset=32 (local.get $at)))))
            (local.set $d (f32x4.add (local.get $d)
              (f32x4.mul (v128.load offset=48 (local.get $row)) (v128.load offset=48 (local.get $at)))))
            (local.set $row (i32.add (local.get $row) (i32.const 64)))
            (local.set $at (i32.add (local.get $at) (i32.const 64)))
            (br $columns)))
        (local.set $a (f32x4.add (f32x4.add (local.get $a) (local.get $b)) (f32x4.add (local.get $c) (local.get $d))))
        (f32.store (local.get $out)
          (f32.add
            (f32.add (f32x4.extract_lane 0 (local.get $a)) (f32x4.extract_lane 1 (local.get $a)))
            (f32.add (f32x4.extract_lane 2 (local.get $a)) (f32x4.extract_lane 3 (local.get $a)))))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (br $rows)))))
