//! What loading a component may cost, checked before anything is compiled. Cranelift's time
//! and memory grow with a function's size and nesting: a 6 MB component of 2 million nested
//! blocks once took 12.6 s and 1.66 GB to compile. A policy is a few thousand lines of code
//! (the bundled ones have well under 100 000 operators in all, nested a few dozen deep), so
//! a budget far above that refuses such a component in milliseconds, with a message, and
//! never starts compiling it.

/// Operators in every function of every core module together.
pub const MAX_OPERATORS: u64 = 4_000_000;
/// Blocks, loops and ifs open at once within a function.
pub const MAX_NESTING: u32 = 4096;
/// Functions with a body, in every core module together.
pub const MAX_FUNCTIONS: u64 = 100_000;

/// Checks `component` against the budget.
///
/// # Errors
/// What exceeds it, or where the bytes stop parsing (the compiler would refuse them too).
pub fn within_budget(component: &[u8]) -> Result<(), String> {
    let (mut operators, mut functions) = (0u64, 0u64);
    for payload in wasmparser::Parser::new(0).parse_all(component) {
        let payload = payload.map_err(|e| format!("it does not parse: {e}"))?;
        let wasmparser::Payload::CodeSectionEntry(body) = payload else {
            continue;
        };
        functions += 1;
        if functions > MAX_FUNCTIONS {
            return Err(format!(
                "it has more than {MAX_FUNCTIONS} functions, past what a policy may load"
            ));
        }
        let mut reader = body
            .get_operators_reader()
            .map_err(|e| format!("function {functions} does not parse: {e}"))?;
        let mut depth = 0u32;
        while !reader.eof() {
            let op = reader
                .read()
                .map_err(|e| format!("function {functions} does not parse: {e}"))?;
            operators += 1;
            match op {
                wasmparser::Operator::Block { .. }
                | wasmparser::Operator::Loop { .. }
                | wasmparser::Operator::If { .. }
                | wasmparser::Operator::TryTable { .. } => {
                    depth += 1;
                    if depth > MAX_NESTING {
                        return Err(format!(
                            "function {functions} nests blocks more than {MAX_NESTING} deep, past what a policy may load"
                        ));
                    }
                }
                wasmparser::Operator::End => depth = depth.saturating_sub(1),
                _ => {}
            }
            if operators > MAX_OPERATORS {
                return Err(format!(
                    "it has more than {MAX_OPERATORS} instructions, past what a policy may load"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A core module of one function `() -> ()` whose body is `body` (without its `end`).
    fn module_with_body(body: &[u8]) -> Vec<u8> {
        let mut code = vec![0x00]; // no locals
        code.extend_from_slice(body);
        code.push(0x0b);
        let mut func = Vec::new();
        leb(&mut func, code.len() as u64);
        func.extend_from_slice(&code);
        let mut section = vec![0x01];
        section.extend_from_slice(&func);
        let mut out = b"\0asm\x01\0\0\0".to_vec();
        out.extend_from_slice(&[0x01, 0x04, 0x01, 0x60, 0x00, 0x00]); // type () -> ()
        out.extend_from_slice(&[0x03, 0x02, 0x01, 0x00]); // one function of type 0
        out.push(0x0a);
        leb(&mut out, section.len() as u64);
        out.extend_from_slice(&section);
        out
    }

    fn leb(out: &mut Vec<u8>, mut n: u64) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }

    #[test]
    fn blocks_nested_past_the_limit_are_refused_before_compiling() {
        let depth = MAX_NESTING as usize + 1;
        let mut body = [0x02, 0x40].repeat(depth); // block (empty type)
        body.extend(std::iter::repeat_n(0x0b, depth));
        let err = within_budget(&module_with_body(&body)).unwrap_err();
        assert!(err.contains("nests blocks more than 4096 deep"), "{err}");
        let mut shallow = [0x02, 0x40].repeat(100);
        shallow.extend(std::iter::repeat_n(0x0b, 100));
        assert_eq!(within_budget(&module_with_body(&shallow)), Ok(()));
    }

    #[test]
    fn a_body_past_the_instruction_budget_is_refused() {
        let body = vec![0x01; MAX_OPERATORS as usize + 1]; // nop
        let err = within_budget(&module_with_body(&body)).unwrap_err();
        assert!(err.contains("instructions"), "{err}");
    }
}
