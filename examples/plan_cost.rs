//! Planning cost of wide graphs: a sum of N distinct inputs and `x + c_i` over N constants.
use lazyfuse as lf;
use lf::Array;
fn main() -> lf::Result<()> {
    let dev = lf::Device::Cpu;
    for n in [400usize, 800, 2000] {
        let xs: Vec<Array> = (0..n)
            .map(|i| Array::from_vec_on(vec![i as f64; 4], &[4], &dev))
            .collect::<lf::Result<_>>()?;
        let mut s = xs[0].clone();
        for x in &xs[1..] {
            s = &s + x;
        }
        let t = std::time::Instant::now();
        let k = lf::debug::kernel_count(&[&s])?;
        println!(
            "sum of {n} inputs: {k} kernels, planned in {:?}",
            t.elapsed()
        );
    }
    {
        let n = 100_000;
        let mut x = Array::from_vec_on(vec![0.5f64, 1.0], &[2], &dev)?;
        for i in 0..n {
            x = if i % 2 == 0 { &x * 1.0001 } else { &x + 0.001 };
        }
        let t = std::time::Instant::now();
        let k = lf::debug::kernel_count(&[&x])?;
        println!(
            "chain of {n} ops: {k} kernels, planned in {:?}",
            t.elapsed()
        );
    }
    for n in [5000usize] {
        let x = Array::from_vec_on(vec![1.0f64; 4], &[4], &dev)?;
        let mut s = x.clone();
        for i in 0..n {
            s = &s + (i as f64 * 1e-3);
        }
        let t = std::time::Instant::now();
        let k = lf::debug::kernel_count(&[&s])?;
        println!(
            "x + c_i over {n} constants: {k} kernels, planned in {:?}",
            t.elapsed()
        );
        let v: Vec<f64> = s.to_vec()?;
        let want = 1.0 + (0..n).map(|i| i as f64 * 1e-3).sum::<f64>();
        println!("  value {} (want {want})", v[0]);
    }
    Ok(())
}
